//! meshlb's API as Cloudflare's own clients call it (docs/api.md#using-cloudflares-sdks-and-tools):
//! every check of `tests/sdk/checks.py` run with the official Python SDK and every check of
//! `tests/sdk/checks.mjs` with the official TypeScript SDK, both pinned
//! (`tests/sdk/requirements.txt`, `tests/sdk/package-lock.json`) and installed by
//! `scripts/sdk.sh` under `target/sdk` (or `$MESHLB_SDK_DIR`). The Python client validates
//! every answer strictly; neither retries, but where a check counts retries.
//!
//! One world: a config primary with an email channel (so pools may carry
//! `notification_email`) and three probers of WEU with an empty config (they run previews from
//! gossip alone), and an origin on 127.0.0.2 that answers 200, and 404 on `/missing`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use test_support::*;

/// Where `scripts/sdk.sh` installed the SDKs.
fn sdk_dir() -> PathBuf {
    std::env::var_os("MESHLB_SDK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/sdk")))
}

struct World {
    _dir: tempfile::TempDir,
    admin: SocketAddr,
    origin: Origin,
    _procs: Procs,
}

fn start_world() -> World {
    let sdk = sdk_dir();
    assert!(
        sdk.join("installed").exists(),
        "Cloudflare's SDKs are not installed under {}: run scripts/sdk.sh (scripts/test.sh does)",
        sdk.display()
    );
    // The TypeScript checks import `cloudflare` from the node_modules beside them.
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/checks.mjs"),
        sdk.join("node/checks.mjs"),
    )
    .expect("checks.mjs beside the TypeScript SDK");
    let (dir, key) = scratch_dir_with_key("sdk");
    let config = dir.path().join("primary.toml");
    // Nothing listens on the SMTP port: mail is not what these checks read (tests/notify.rs does).
    let smtp = free_tcp().port();
    std::fs::write(
        &config,
        format!(
            "[[notifications.email]]\nname = \"ops\"\nfrom = \"meshlb@example.com\"\nto = [\"ops@example.com\"]\nsmtp_host = \"127.0.0.1\"\nsmtp_port = {smtp}\nsmtp_tls = \"none\"\n"
        ),
    )
    .expect("config");
    let probers = dir.path().join("probers.toml");
    std::fs::write(&probers, "").expect("probers' config");
    let admin = free_tcp();
    let mut extra = admin_token_args(dir.path());
    extra.push("--config-primary".into());
    // A tunnel listener, so the API has PoPs to put in a tunnel's token.
    let cert = rcgen::generate_simple_self_signed(vec!["pop.test".into()]).expect("cert");
    let (cert_file, key_file) = (dir.path().join("pop.pem"), dir.path().join("pop.key"));
    std::fs::write(&cert_file, cert.cert.pem()).expect("cert");
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).expect("key");
    extra.extend([
        "--tunnel-listen".into(),
        free_tcp().to_string(),
        "--tunnel-cert".into(),
        cert_file.display().to_string(),
        "--tunnel-key".into(),
        key_file.display().to_string(),
    ]);
    let (procs, _) = start_mesh_split(&config, &probers, &key, admin, &extra);
    wait_for("the admin API", Duration::from_secs(30), || {
        get(admin, "/config").is_some()
    });
    wait_for("three probers in the mesh", Duration::from_secs(30), || {
        get(admin, "/members").is_some_and(|m| {
            m.as_array().is_some_and(|m| {
                m.iter()
                    .filter(|n| n["role"] == "prober" && n["alive"] == true)
                    .count()
                    == 3
            })
        })
    });
    World {
        _dir: dir,
        admin,
        origin: origin_missing("127.0.0.2", "/missing"),
        _procs: procs,
    }
}

static WORLD: Shared<World> = Shared::new(start_world);

#[derive(Clone, Copy)]
enum Sdk {
    Python,
    TypeScript,
}

impl World {
    /// Runs `check` with `sdk`; fails with what it printed when it fails.
    fn run(&self, sdk: Sdk, check: &str) {
        let dir = sdk_dir();
        let mut command = match sdk {
            Sdk::Python => {
                let mut c = Command::new(dir.join("venv/bin/python"));
                c.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/checks.py"));
                c
            }
            Sdk::TypeScript => {
                let mut c = Command::new("node");
                c.arg(dir.join("node/checks.mjs"));
                c
            }
        };
        let out = command
            .arg(check)
            .env("MESHLB_API", format!("http://{}/client/v4", self.admin))
            .env("MESHLB_TOKEN", "secret-token")
            .env("MESHLB_ORIGIN_ADDRESS", "127.0.0.2")
            .env("MESHLB_ORIGIN_PORT", self.origin.port.to_string())
            .env("MESHLB_ZONE", "example.com")
            .output()
            .expect("the SDK's interpreter");
        assert!(
            out.status.success(),
            "{check} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Each check once per SDK, as trials named `python::CHECK` and `typescript::CHECK`.
macro_rules! sdk_checks {
    ($($check:ident),+ $(,)?) => {
        mod python {
            $(pub fn $check(w: &mut super::World) {
                w.run(super::Sdk::Python, stringify!($check))
            })+
        }
        mod typescript {
            $(pub fn $check(w: &mut super::World) {
                w.run(super::Sdk::TypeScript, stringify!($check))
            })+
        }
        fn all() -> Vec<libtest_mimic::Trial> {
            let mut trials = vec![$(WORLD.trial(concat!("python::", stringify!($check)), python::$check)),+];
            trials.extend([$(WORLD.trial(concat!("typescript::", stringify!($check)), typescript::$check)),+]);
            trials
        }
    };
}

sdk_checks![
    monitors_are_created_read_replaced_patched_listed_and_deleted,
    pools_are_created_read_replaced_patched_listed_and_deleted,
    pools_listed_by_monitor_are_the_ones_that_use_it,
    a_bulk_patch_clears_every_pools_notification_email,
    load_balancers_are_created_read_patched_listed_and_deleted,
    monitor_groups_are_created_read_and_deleted,
    references_of_monitors_and_pools_name_both_directions,
    search_finds_resources_with_their_references,
    a_monitor_preview_reports_each_origin_as_the_probers_saw_it,
    a_pool_preview_reports_its_origins_healthy,
    pool_health_answers_per_region,
    regions_list_their_countries,
    errors_are_typed_with_the_envelopes_errors,
    a_conflict_is_not_retried,
    private_networks_are_made_and_a_pool_endpoint_in_one_reads_back,
];

fn main() {
    trials::run(all(), Threads::One);
}
