//! What ships in deploy/: Kubernetes manifests parse and carry a valid config and real flags;
//! systemd units use real flags; the alert rules and scrape config pass promtool (with the
//! rules' unit tests); every metric the dashboards and rules query is one meshlb exports, the
//! exposition passes `promtool check metrics`, and a real Prometheus scrapes it and answers a
//! query for it. The allocator's options reach jemalloc as operations.md says.
//!
//! The metric trials share one mesh (with Prometheus), started once; a `libtest-mimic` harness
//! (`main` at the end) runs the trials and stops it after them.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use test_support::config::{Config, Lb, Monitor, MonitorGroup, Pool};
use test_support::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn help(sub: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args([sub, "--help"])
        .output()
        .expect("meshlb --help");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Every `--flag` in `args` is one the subcommand accepts.
fn check_flags(what: &str, sub: &str, args: &[String]) {
    let help = help(sub);
    assert!(
        !help.is_empty(),
        "{what}: `meshlb {sub}` is not a subcommand"
    );
    for a in args.iter().filter(|a| a.starts_with("--")) {
        let flag = a.split('=').next().unwrap_or(a);
        assert!(
            help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
            "{what}: `meshlb {sub}` has no flag {flag}"
        );
    }
}

fn files(dir: &str, ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(format!("{ROOT}/{dir}"))
        .expect(dir)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn kubernetes_manifests_parse_with_a_valid_config_and_real_flags() {
    let regions = lb_core::regions_table::RegionsTable::embedded().expect("regions");
    let mut kinds = BTreeSet::new();
    for path in files("deploy/kubernetes", "yaml") {
        let text = std::fs::read_to_string(&path).expect("manifest");
        let name = path.display().to_string();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v = serde_yaml_ng::Value::deserialize_from(doc, &name);
            let kind = v["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: no kind"));
            assert!(v["apiVersion"].as_str().is_some(), "{name}: no apiVersion");
            assert!(
                v["metadata"]["name"].as_str().is_some(),
                "{name}: no metadata.name"
            );
            if kind != "Namespace" {
                assert_eq!(
                    v["metadata"]["namespace"].as_str(),
                    Some("meshlb"),
                    "{name} {kind}"
                );
            }
            kinds.insert(kind.to_string());
            if kind == "ConfigMap" {
                let toml = v["data"]["meshlb.toml"]
                    .as_str()
                    .expect("meshlb.toml in the ConfigMap");
                if let Err(e) = lb_core::config::Config::parse(&name, toml, &regions) {
                    panic!("{name}: the embedded meshlb.toml is invalid:\n{e}");
                }
            }
            let containers = &v["spec"]["template"]["spec"]["containers"];
            for c in containers.as_sequence().into_iter().flatten() {
                let args: Vec<String> = c["args"]
                    .as_sequence()
                    .expect("container args")
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect();
                check_flags(&name, &args[0], &args[1..]);
                for a in &args {
                    if let Some(r) = a.strip_prefix("--region=") {
                        assert!(
                            r.parse::<lb_core::region::Region>().is_ok(),
                            "{name}: region {r}"
                        );
                    }
                }
            }
        }
    }
    for want in [
        "Namespace",
        "Secret",
        "ConfigMap",
        "StatefulSet",
        "Service",
        "ServiceMonitor",
    ] {
        assert!(
            kinds.contains(want),
            "no {want} among the manifests: {kinds:?}"
        );
    }
}

trait FromDoc {
    fn deserialize_from(doc: serde_yaml_ng::Deserializer<'_>, name: &str) -> Self;
}

impl FromDoc for serde_yaml_ng::Value {
    fn deserialize_from(doc: serde_yaml_ng::Deserializer<'_>, name: &str) -> Self {
        use serde::Deserialize;
        serde_yaml_ng::Value::deserialize(doc).unwrap_or_else(|e| panic!("{name}: {e}"))
    }
}

/// The allocator knob docs/operations.md names reaches jemalloc: an option it does not know is
/// refused by name, and `stats_print` prints its statistics when the process exits.
fn allocator_options_reach_jemalloc() {
    let run = |conf: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .arg("--version")
            .env("_RJEM_MALLOC_CONF", conf)
            .output()
            .expect("meshlb --version");
        assert!(out.status.success(), "meshlb --version with {conf}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stats = run("stats_print:true");
    assert!(stats.contains("Begin jemalloc statistics"), "{stats}");
    let refused = run("no_such_option:1");
    assert!(
        refused.contains("Invalid conf pair: no_such_option:1"),
        "{refused}"
    );
    let docs =
        std::fs::read_to_string(format!("{ROOT}/docs/operations.md")).expect("operations.md");
    assert!(
        docs.contains("_RJEM_MALLOC_CONF"),
        "operations.md names the variable"
    );
}

fn systemd_units_use_real_flags() {
    for path in files("deploy/systemd", "service") {
        let text = std::fs::read_to_string(&path)
            .expect("unit")
            .replace("\\\n", " ");
        let exec = text
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .expect("ExecStart");
        let words: Vec<String> = exec.split_whitespace().map(str::to_string).collect();
        assert_eq!(words[0], "/usr/local/bin/meshlb");
        check_flags(&path.display().to_string(), &words[1], &words[2..]);
    }
}

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(format!("{ROOT}/deploy/prometheus"))
        .output()
        .expect("promtool (package prometheus)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

fn alert_rules_and_scrape_config_pass_promtool() {
    promtool(&["check", "rules", "alerts.yml"]);
    let tests = promtool(&["test", "rules", "alerts_test.yml"]);
    assert!(tests.contains("SUCCESS"), "{tests}");
    promtool(&["check", "config", "prometheus.yml"]);
}

/// Metric names (`meshlb_...`) in PromQL expressions of the dashboards and the rules.
fn queried_metrics() -> BTreeSet<String> {
    let mut texts = Vec::new();
    for path in files("deploy/grafana", "json") {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("dashboard"))
                .expect("json");
        fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, x) in m {
                        if k == "expr" || k == "query" {
                            if let Some(s) = x.as_str() {
                                out.push(s.to_string());
                            }
                        }
                        exprs(x, out);
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
                _ => {}
            }
        }
        exprs(&v, &mut texts);
    }
    texts.push(
        std::fs::read_to_string(format!("{ROOT}/deploy/prometheus/alerts.yml")).expect("rules"),
    );
    let mut names = BTreeSet::new();
    for t in texts {
        let mut rest = t.as_str();
        while let Some(i) = rest.find("meshlb_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.insert(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    names
}

/// A mesh exporting every kind of metric: an aggregator with DNS, the proxy and a layer-4 load
/// balancer (each having served a request), a monitor group, a webhook channel; one more prober
/// serving its own `/metrics`; and a real Prometheus scraping both.
struct World {
    admin: SocketAddr,
    prober_metrics: SocketAddr,
    /// Prometheus's web listener.
    web: SocketAddr,
    _origin: Origin,
    _scratch: tempfile::TempDir,
    _procs: Procs,
}

fn deploy_config(port: u16, l4: u16) -> String {
    let on_origin = |name: &str| {
        Pool::new(name)
            .regions(&["WEU"])
            .origin("a", ("127.0.0.1", port))
    };
    Config::new()
        .monitor(Monitor::http("http").port(port).interval(1).timeout(1))
        .monitor(Monitor::tcp("tcp").port(port).interval(1).timeout(1))
        .monitor_group(MonitorGroup::new("both").member("http").monitoring_only("tcp"))
        .pool(on_origin("web").monitor("http"))
        .pool(on_origin("grouped").monitor_group("both"))
        .load_balancer(Lb::new("www.example.test").proxied().pools(&["web"]))
        .load_balancer(Lb::new("dns.example.test").pools(&["web"]))
        .load_balancer(
            Lb::new("tcp.example.test")
                .protocol("tcp")
                .listen(&[l4])
                .origin_port(port)
                .pools(&["web"]),
        )
        .extra("[notifications]\n[[notifications.webhooks]]\nname = \"hook\"\nurl = \"http://127.0.0.1:9/nowhere\"")
        .render()
}

/// A query, a request through the proxy and a connection through the layer-4 load balancer,
/// so that request series have samples.
fn traffic(dns: SocketAddr, proxy: SocketAddr, l4: SocketAddr) {
    let _ = Command::new("dig")
        .args(["@127.0.0.1", "-p", &dns.port().to_string()])
        .args(["dns.example.test", "A", "+short"])
        .output();
    let _ = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-H", "Host: www.example.test"])
        .arg(format!("http://{proxy}/"))
        .output();
    let _ = Command::new("curl")
        .args(["-s", "-o", "/dev/null"])
        .arg(format!("http://{l4}/"))
        .output();
}

/// Prometheus scraping `targets` every second, its data in `dir`, listening on `web`.
fn prometheus(
    dir: &std::path::Path,
    targets: [SocketAddr; 2],
    web: SocketAddr,
) -> std::process::Child {
    let [a, b] = targets;
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{ scrape_interval: 1s }}\nscrape_configs:\n  - job_name: meshlb\n    static_configs:\n      - targets: [\"{a}\", \"{b}\"]\n"
        ),
    )
    .expect("prometheus.yml");
    Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (package prometheus)")
}

fn start_world() -> World {
    let (scratch, key) = scratch_dir_with_key("deploy");
    let dir = scratch.path();
    let origin = origin();
    let l4 = free_tcp();
    let config = dir.join("meshlb.toml");
    std::fs::write(&config, deploy_config(origin.port, l4.port())).expect("config");
    let (admin, dns, proxy, prober_metrics) =
        (free_tcp(), free_tcp_and_udp(), free_tcp(), free_tcp());
    let extra: Vec<String> = ["--dns", &dns.to_string(), "--proxy", &proxy.to_string()]
        .into_iter()
        .chain(["--l4", "127.0.0.1"])
        .map(String::from)
        .collect();
    let mut procs = start_mesh(&config, &key, admin, &extra);
    // One more prober, alone, serving its own /metrics.
    procs.0.push(spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args(["prober", "--config", &config.display().to_string()])
            .args(["--region", "WEU", "--dc", "ams"])
            .args(["--listen", &free_udp().to_string()])
            .args(["--key-file", &key.display().to_string()])
            .args(["--metrics", &prober_metrics.to_string()]),
        "prober",
    ));
    let web = free_tcp();
    procs.0.push(prometheus(dir, [admin, prober_metrics], web));
    wait_for(
        "the endpoint to be healthy",
        Duration::from_secs(20),
        || {
            scrape(admin).lines().any(|l| {
                l.starts_with("meshlb_endpoint_state{")
                    && l.contains("state=\"healthy\"")
                    && l.ends_with(" 1")
            })
        },
    );
    traffic(dns, proxy, l4);
    wait_for("the prober's first probes", Duration::from_secs(10), || {
        scrape(prober_metrics).contains("meshlb_probes_total{")
    });
    World {
        admin,
        prober_metrics,
        web,
        _origin: origin,
        _scratch: scratch,
        _procs: procs,
    }
}

static WORLD: Shared<World> = Shared::new(start_world);

/// The body of an HTTP answer (all of `text` when it has no head).
fn body(text: String) -> String {
    text.split_once("\r\n\r\n")
        .map_or(text.clone(), |(_, b)| b.to_string())
}

fn every_metric_the_dashboards_and_rules_query_is_exported(w: &mut World) {
    let exposition = format!(
        "{}\n{}",
        body(scrape(w.admin)),
        body(scrape(w.prober_metrics))
    );
    // Histograms as name_bucket/_sum/_count.
    let exported: BTreeSet<&str> = exposition
        .lines()
        .filter(|l| l.starts_with("meshlb_"))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let missing: Vec<String> = queried_metrics()
        .into_iter()
        .filter(|m| !exported.contains(m.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "queried but not exported: {missing:?}\nexported: {exported:?}"
    );
}

/// `promtool check metrics` on what `/metrics` at `addr` serves.
fn passes_promtool(what: &str, addr: SocketAddr) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body(scrape(addr)).as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool check metrics ({what}):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn the_aggregators_exposition_passes_promtool(w: &mut World) {
    passes_promtool("aggregator", w.admin);
}

fn the_probers_exposition_passes_promtool(w: &mut World) {
    passes_promtool("prober", w.prober_metrics);
}

fn a_real_prometheus_scrapes_both_nodes_and_answers_queries(w: &mut World) {
    let query = |q: &str| -> Option<serde_json::Value> {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "2", "--get", "--data-urlencode"])
            .arg(format!("query={q}"))
            .arg(format!("http://{}/api/v1/query", w.web))
            .output()
            .ok()?;
        serde_json::from_slice(&out.stdout).ok()
    };
    wait_for(
        "Prometheus to return the aggregator's series",
        Duration::from_secs(30),
        || {
            query("meshlb_endpoint_state{state=\"healthy\"} == 1").is_some_and(|v| {
                v["status"] == "success"
                    && v["data"]["result"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|s| s["metric"]["endpoint"] == "a"))
            })
        },
    );
    let probes = query("sum(meshlb_probes_total)").expect("query");
    assert_eq!(probes["status"], "success", "{probes}");
}

fn main() {
    let files = trials![
        kubernetes_manifests_parse_with_a_valid_config_and_real_flags,
        allocator_options_reach_jemalloc,
        systemd_units_use_real_flags,
        alert_rules_and_scrape_config_pass_promtool,
    ];
    let metrics = trials![WORLD =>
        every_metric_the_dashboards_and_rules_query_is_exported,
        the_aggregators_exposition_passes_promtool,
        the_probers_exposition_passes_promtool,
        a_real_prometheus_scrapes_both_nodes_and_answers_queries,
    ];
    let all = [files, metrics].into_iter().flatten().collect();
    // The file checks need no world; they run beside the one the metrics trials share.
    trials::run(all, Threads::Cores);
}
