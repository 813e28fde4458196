//! Emulated inter-region latency, for the demo (`meshlb demo`'s origins) and the chaos suite:
//! the round-trip time between a prober's region and an origin's continent, so probes from
//! different regions measure different RTTs and latency-based steering has something to steer
//! by on one machine. The demo knows the asker's region from the probe's User-Agent
//! (`meshlb-prober/VERSION (pool NAME; region CODE)`, `prober/src/target.rs`); the chaos suite
//! from its source address.

/// Round-trip times (ms) from each region to the three continents (eu: Frankfurt, us:
/// Virginia, ap: Singapore), in the spirit of public inter-region measurements.
pub const RTT_MS: [(&str, [u64; 3]); 13] = [
    ("WNAM", [150, 70, 170]),
    ("ENAM", [90, 10, 220]),
    ("NSAM", [130, 50, 230]),
    ("SSAM", [200, 120, 320]),
    ("WEU", [15, 85, 160]),
    ("EEU", [30, 110, 180]),
    ("ME", [60, 150, 90]),
    ("NAF", [50, 130, 200]),
    ("SAF", [160, 230, 280]),
    ("SAS", [120, 220, 60]),
    ("SEAS", [160, 230, 10]),
    ("NEAS", [230, 160, 70]),
    ("OC", [280, 200, 90]),
];

/// The column of `RTT_MS` for a continent (`eu`, `us`, anything else `ap`).
pub fn continent_index(c: &str) -> usize {
    match c {
        "eu" => 0,
        "us" => 1,
        _ => 2,
    }
}

/// The round-trip time from `region` to `continent` (its `RTT_MS` column); 0 for an unknown
/// region.
pub fn rtt_ms(region: &str, continent: usize) -> u64 {
    RTT_MS
        .iter()
        .find(|(code, _)| *code == region)
        .map_or(0, |(_, row)| row[continent.min(2)])
}

/// The region a prober's User-Agent names, if it names one.
pub fn region_of_user_agent(user_agent: &str) -> Option<&str> {
    let rest = user_agent.split("; region ").nth(1)?;
    rest.split(')').next().filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_tells_its_region_and_gets_that_region_s_delay() {
        let ua = "meshlb-prober/0.1.0 (pool eu; region SEAS)";
        assert_eq!(region_of_user_agent(ua), Some("SEAS"));
        assert_eq!(region_of_user_agent("curl/8.0"), None);
        assert_eq!(region_of_user_agent("meshlb-prober/0.1.0 (pool eu)"), None);
        assert_eq!(rtt_ms("SEAS", continent_index("ap")), 10);
        assert_eq!(rtt_ms("WEU", continent_index("eu")), 15);
        assert_eq!(rtt_ms("nowhere", 0), 0);
    }
}
