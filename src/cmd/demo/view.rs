//! The demo's terminal view, rendered from the admin API's `/status` and `/events` JSON: a
//! regions x endpoints grid of verdicts, pool and load balancer states, recent changes, and
//! what to try. Pure: text in, text out.

use serde_json::Value;

/// The 13 regions, in the grid's column order (west to east, north to south).
pub const REGIONS: [&str; 13] = [
    "WNAM", "ENAM", "NSAM", "SSAM", "WEU", "EEU", "ME", "NAF", "SAF", "SAS", "SEAS", "NEAS", "OC",
];

/// What the view prints besides the mesh's state.
pub struct Info<'a> {
    pub dns: &'a str,
    pub proxy: &'a str,
    pub admin: &'a str,
    pub origins: &'a [(String, bool)],
    pub message: &'a str,
    pub logs: &'a str,
}

fn cell(region: Option<&Value>) -> &'static str {
    match region.map(|r| &r["verdict"]) {
        Some(Value::Bool(true)) => "  up ",
        Some(Value::Bool(false)) => " DOWN",
        _ => "   · ",
    }
}

fn hhmmss(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}", (s / 3600) % 24, (s / 60) % 60, s % 60)
}

/// The whole screen: where things listen, then (once the aggregator answers) the grid, the
/// pools' and load balancers' states, the recent changes and what to try.
pub fn render(status: Option<&Value>, events: Option<&Value>, info: &Info<'_>) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "meshlb demo — DNS {}  proxy http://{}  admin http://{}  console http://{}/ui/\n\n",
        info.dns, info.proxy, info.admin, info.admin
    ));
    let Some(status) = status else {
        out.push_str("waiting for the aggregator ...\n");
        return out;
    };
    grid(&mut out, status, info.origins);
    states(&mut out, status);
    recent_changes(&mut out, events);
    what_to_try(&mut out, info);
    out
}

/// The regions x endpoints grid: a row per endpoint with each region's verdict, the
/// endpoint's, and whether its demo origin runs.
fn grid(out: &mut String, status: &Value, origins: &[(String, bool)]) {
    out.push_str(&format!(
        "{:<16}{}  {:>9}  {:>8}\n",
        "endpoint",
        REGIONS
            .iter()
            .map(|r| format!("{r:>5}"))
            .collect::<String>(),
        "verdict",
        "origin"
    ));
    for pool in status["pools"].as_array().into_iter().flatten() {
        let pname = pool["name"].as_str().unwrap_or("?");
        for e in pool["endpoints"].as_array().into_iter().flatten() {
            let ename = e["name"].as_str().unwrap_or("?");
            let regions = e["regions"].as_array();
            let row: String = REGIONS
                .iter()
                .map(|code| cell(regions.and_then(|rs| rs.iter().find(|r| r["region"] == *code))))
                .collect();
            let running = origins
                .iter()
                .find(|(n, _)| n == ename)
                .map_or("", |(_, up)| if *up { "running" } else { "STOPPED" });
            out.push_str(&format!(
                "{:<16}{row}  {:>9}  {:>8}\n",
                format!("{pname}/{ename}"),
                e["verdict"].as_str().unwrap_or("?"),
                running
            ));
        }
    }
}

/// One line of the pools' states (with their WEU RTT), one of the load balancers'.
fn states(out: &mut String, status: &Value) {
    out.push_str("\npools: ");
    let pools: Vec<String> = status["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let rtt = p["rtt_ms"]["WEU"]
                .as_f64()
                .map(|v| format!(" {v:.0} ms"))
                .unwrap_or_default();
            format!(
                "{} {}{rtt}",
                p["name"].as_str().unwrap_or("?"),
                p["state"].as_str().unwrap_or("?")
            )
        })
        .collect();
    out.push_str(&pools.join(" | "));
    out.push_str("\nload balancers: ");
    let lbs: Vec<String> = status["load_balancers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            format!(
                "{} {}",
                l["name"].as_str().unwrap_or("?"),
                l["state"].as_str().unwrap_or("?")
            )
        })
        .collect();
    out.push_str(&lbs.join(" | "));
}

/// The last eight health changes that are news (first verdicts left out), oldest first.
fn recent_changes(out: &mut String, events: Option<&Value>) {
    out.push_str("\n\nrecent health changes:\n");
    let recent: Vec<&Value> = events
        .and_then(Value::as_array)
        .map(|a| a.iter().filter(|e| e["from"] != "unknown").collect())
        .unwrap_or_default();
    if recent.is_empty() {
        out.push_str("  (none yet)\n");
    }
    for e in recent.iter().rev().take(8).rev() {
        let what = match (e["pool"].as_str(), e["endpoint"].as_str()) {
            (Some(p), Some(ep)) => format!("endpoint {p}/{ep}"),
            (Some(p), None) => format!("pool {p}"),
            _ => format!(
                "load balancer {}",
                e["load_balancer"].as_str().unwrap_or("?")
            ),
        };
        out.push_str(&format!(
            "  {} {what}: {} -> {}\n",
            hhmmss(e["at_ms"].as_u64().unwrap_or(0)),
            e["from"].as_str().unwrap_or("?"),
            e["to"].as_str().unwrap_or("?")
        ));
    }
}

/// Commands to try against the demo, the commands it takes, where its logs are, and the
/// last command's message.
fn what_to_try(out: &mut String, info: &Info<'_>) {
    let (dns_ip, dns_port) = info.dns.rsplit_once(':').unwrap_or((info.dns, "53"));
    out.push_str(&format!(
        "\ntry:\n  dig @{dns_ip} -p {dns_port} failover.demo.test A +short\n  \
         dig @{dns_ip} -p {dns_port} geo.demo.test A +subnet=10.3.0.0/24   (10.1/16 WEU, 10.2/16 ENAM, 10.3/16 SEAS)\n  \
         curl -si -H 'Host: www.demo.test' http://{}/\n  \
         curl -s http://{}/status   (the votes behind every verdict)\n",
        info.proxy, info.admin
    ));
    out.push_str(
        "type: kill NAME | start NAME (an origin: eu-1 eu-2 us-1 us-2 ap-1 ap-2 static) | quit\n",
    );
    out.push_str(&format!("logs: {}\n", info.logs));
    if !info.message.is_empty() {
        out.push_str(&format!("> {}\n", info.message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn grid_states_and_changes() {
        let status = json!({
            "pools": [{"name": "eu", "state": "degraded", "rtt_ms": {"WEU": 1.4},
                "endpoints": [
                    {"name": "eu-1", "verdict": "healthy", "regions": [
                        {"region": "WEU", "verdict": true}, {"region": "ENAM", "verdict": null}]},
                    {"name": "eu-2", "verdict": "unhealthy", "regions": [
                        {"region": "WEU", "verdict": false}]}]}],
            "load_balancers": [{"name": "www.demo.test", "state": "healthy"}]
        });
        let events = json!([
            {"at_ms": 3_723_000, "kind": "endpoint", "pool": "eu", "endpoint": "eu-2",
             "from": "healthy", "to": "unhealthy"},
            {"at_ms": 1_000, "kind": "endpoint", "pool": "eu", "endpoint": "eu-1",
             "from": "unknown", "to": "healthy"}
        ]);
        let origins = vec![("eu-1".to_string(), true), ("eu-2".to_string(), false)];
        let info = Info {
            dns: "127.0.0.1:5353",
            proxy: "127.0.0.1:8080",
            admin: "127.0.0.1:7070",
            origins: &origins,
            message: "stopped eu-2",
            logs: "/tmp/x",
        };
        let text = render(Some(&status), Some(&events), &info);
        let eu1 = text
            .lines()
            .find(|l| l.starts_with("eu/eu-1"))
            .expect("eu-1 row");
        // WNAM, ENAM and NSAM have no verdict; WEU (fifth column) is up.
        assert!(eu1.contains("   ·    ·    ·   up "), "{eu1}");
        assert!(eu1.ends_with("healthy   running"), "{eu1}");
        let eu2 = text
            .lines()
            .find(|l| l.starts_with("eu/eu-2"))
            .expect("eu-2 row");
        assert!(eu2.contains(" DOWN") && eu2.ends_with("STOPPED"), "{eu2}");
        assert!(text.contains("pools: eu degraded 1 ms"));
        assert!(text.contains("load balancers: www.demo.test healthy"));
        assert!(text.contains("01:02:03 endpoint eu/eu-2: healthy -> unhealthy"));
        assert!(
            !text.contains("unknown -> healthy"),
            "first verdicts are not changes"
        );
        assert!(text.contains("dig @127.0.0.1 -p 5353 failover.demo.test"));
        assert!(text.contains("> stopped eu-2"));
        assert!(render(None, None, &info).contains("waiting for the aggregator"));
    }
}
