//! `meshlb pools|monitors|load-balancers list|get|apply|delete` and `meshlb config
//! show|diff|push`: the control-plane API (docs/api.md) from the command line. Writes go to
//! the config primary's admin API; `--json` prints the API's answers as they are.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use serde_json::Value;

use super::admin_client::{AdminArgs, AdminClient};

/// Which resources a verb acts on.
#[derive(Debug, Clone, Copy)]
pub enum Resource {
    Pools,
    Monitors,
    MonitorGroups,
    LoadBalancers,
}

impl Resource {
    fn collection(self) -> &'static str {
        match self {
            Resource::Pools => "/client/v4/accounts/meshlb/load_balancers/pools",
            Resource::Monitors => "/client/v4/accounts/meshlb/load_balancers/monitors",
            Resource::MonitorGroups => "/client/v4/accounts/meshlb/load_balancers/monitor_groups",
            Resource::LoadBalancers => "/client/v4/zones/meshlb/load_balancers",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ResourceArgs {
    #[command(subcommand)]
    verb: Verb,
    #[command(flatten)]
    admin: AdminArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// Every resource: its id and description.
    List,
    /// One resource, as JSON.
    Get { id: String },
    /// Create or replace the resource(s) of a file: a JSON object (a Cloudflare API body) or
    /// a list of them, or TOML with the config file's syntax for one resource.
    Apply {
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: PathBuf,
    },
    /// Delete a resource.
    Delete { id: String },
}

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    verb: ConfigVerb,
    #[command(flatten)]
    admin: AdminArgs,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigVerb {
    /// The generation in force, this node's part, the primary.
    Show,
    /// How FILE differs from the document in force (a unified diff; exit 1 when it does).
    Diff { file: PathBuf },
    /// Make FILE the mesh's config, as one generation (on the primary).
    Push {
        file: PathBuf,
        /// Only if the generation in force is this one (else the push is refused: 409).
        #[arg(long, value_name = "GENERATION")]
        if_match: Option<u64>,
    },
    /// Make an Ed25519 key pair for signing generations: DIR/signing.key (give it to
    /// config-writing nodes with --config-signing-key, mode 0600) and DIR/signing.pub (give it
    /// to every node with --config-verify-key).
    Keygen {
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// The API's answer as JSON, or its errors as one message.
fn answer(status: u16, body: &str) -> anyhow::Result<Value> {
    let value: Value = serde_json::from_str(body)
        .with_context(|| format!("the API answered {status} without JSON"))?;
    if value["success"] == Value::Bool(true) {
        return Ok(value);
    }
    let errors: Vec<String> = value["errors"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|e| e["message"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    bail!("the API answered {status}:\n  {}", errors.join("\n  "))
}

fn print(admin: &AdminArgs, value: &Value, text: impl FnOnce(&Value) -> String) {
    if admin.json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
    } else {
        println!("{}", text(value));
    }
}

fn bodies(file: &PathBuf) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let value: Value = if file.extension().is_some_and(|e| e == "toml") {
        let t: toml::Table =
            toml::from_str(&text).with_context(|| format!("{}: not TOML", file.display()))?;
        serde_json::to_value(t)?
    } else {
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", file.display()))?
    };
    Ok(match value {
        Value::Array(items) => items,
        one => vec![one],
    })
}

fn apply_one(client: &AdminClient, r: Resource, body: &Value) -> anyhow::Result<String> {
    let id = body["id"].as_str().or_else(|| body["name"].as_str());
    let bytes = serde_json::to_vec(body)?;
    let json = [("Content-Type", "application/json".to_string())];
    let exists = match id {
        Some(id) => {
            let (status, _, _) =
                client.request("GET", &format!("{}/{id}", r.collection()), None, &[])?;
            status == 200
        }
        None => false,
    };
    let (method, path) = match (exists, id) {
        (true, Some(id)) => ("PUT", format!("{}/{id}", r.collection())),
        _ => ("POST", r.collection().to_string()),
    };
    let (status, _, reply) = client.request(method, &path, Some(&bytes), &json)?;
    let value = answer(status, &reply)?;
    let id = value["result"]["id"].as_str().unwrap_or("?");
    Ok(format!(
        "{} {id}",
        if method == "PUT" {
            "replaced"
        } else {
            "created"
        }
    ))
}

pub fn run_resource(r: Resource, args: &ResourceArgs) -> anyhow::Result<ExitCode> {
    let client = args.admin.client()?;
    match &args.verb {
        Verb::List => {
            let (status, _, body) = client.request("GET", r.collection(), None, &[])?;
            let value = answer(status, &body)?;
            print(&args.admin, &value, |v| {
                v["result"]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .map(|i| {
                                format!(
                                    "{}\t{}",
                                    i["id"].as_str().unwrap_or(""),
                                    i["description"].as_str().unwrap_or("")
                                )
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default()
            });
        }
        Verb::Get { id } => {
            let (status, _, body) =
                client.request("GET", &format!("{}/{id}", r.collection()), None, &[])?;
            let value = answer(status, &body)?;
            print(&args.admin, &value, |v| {
                serde_json::to_string_pretty(&v["result"]).unwrap_or_default()
            });
        }
        Verb::Apply { file } => {
            for body in bodies(file)? {
                println!("{}", apply_one(&client, r, &body)?);
            }
        }
        Verb::Delete { id } => {
            let (status, _, body) =
                client.request("DELETE", &format!("{}/{id}", r.collection()), None, &[])?;
            let value = answer(status, &body)?;
            print(&args.admin, &value, |_| format!("deleted {id}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_config(args: &ConfigArgs) -> anyhow::Result<ExitCode> {
    let client = args.admin.client()?;
    match &args.verb {
        ConfigVerb::Show => {
            let (status, _, body) = client.request("GET", "/config", None, &[])?;
            let value = answer(status, &body)?;
            print(&args.admin, &value, |v| {
                let r = &v["result"];
                format!(
                    "role {}, generation {} (sha256 {}, {} bytes); primary: {}",
                    r["role"].as_str().unwrap_or("?"),
                    r["generation"],
                    r["sha256"].as_str().unwrap_or("?"),
                    r["size"],
                    r["primary"]["node_id"].as_str().unwrap_or("none live")
                )
            });
            Ok(ExitCode::SUCCESS)
        }
        ConfigVerb::Diff { file } => {
            let (status, generation, body) =
                client.request("GET", "/config/document", None, &[])?;
            if status != 200 {
                answer(status, &body)?;
            }
            let next = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let diff = similar::TextDiff::from_lines(&body, &next);
            let from = format!("generation {}", generation.unwrap_or_default());
            let text = diff
                .unified_diff()
                .header(&from, &file.display().to_string())
                .to_string();
            if text.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            print!("{text}");
            Ok(ExitCode::from(1))
        }
        ConfigVerb::Keygen { out } => {
            let (private, public) = meshlb_node::control::writer_key::generate()
                .map_err(|e| anyhow::anyhow!("making a key pair: {e}"))?;
            let key = out.join("signing.key");
            let write_private = || -> std::io::Result<()> {
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&key)?;
                f.write_all(private.as_bytes())
            };
            write_private().with_context(|| format!("cannot write {}", key.display()))?;
            let public_file = out.join("signing.pub");
            std::fs::write(&public_file, public)
                .with_context(|| format!("cannot write {}", public_file.display()))?;
            println!("{}\n{}", key.display(), public_file.display());
            Ok(ExitCode::SUCCESS)
        }
        ConfigVerb::Push { file, if_match } => {
            let text =
                std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            let mut headers = vec![("Content-Type", "application/toml".to_string())];
            if let Some(g) = if_match {
                headers.push(("If-Match", format!("\"{g}\"")));
            }
            let (status, _, body) =
                client.request("PUT", "/config/document", Some(&text), &headers)?;
            let value = answer(status, &body).map_err(|e| anyhow!("{}: {e}", file.display()))?;
            print(&args.admin, &value, |v| {
                let r = &v["result"];
                if r["changed"] == Value::Bool(true) {
                    format!("pushed: generation {}", r["generation"])
                } else {
                    format!(
                        "unchanged: generation {} holds this document",
                        r["generation"]
                    )
                }
            });
            Ok(ExitCode::SUCCESS)
        }
    }
}
