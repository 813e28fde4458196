//! `monitors[].probe_zone` (Cloudflare's "simulate zone"): the monitor probes as the zone's
//! proxied traffic reaches origins, with the TLS the proxy uses for the zone's load balancers
//! (mode, trust anchors, client certificate) and their name as Host, so a check passes only
//! where proxied requests would. The zone must be one of the config's, hold a proxied HTTP load
//! balancer, and its proxied load balancers must agree on that TLS (a monitor has one).

use super::*;
use crate::config::Zone;

impl Validator<'_> {
    /// Resolves each monitor's `probe_zone` into the TLS it probes with.
    pub(super) fn probe_zones(
        &mut self,
        monitors: &mut [Monitor],
        lbs: &[LoadBalancer],
        zones: &[Zone],
    ) {
        for m in monitors.iter_mut() {
            let Some(zone_name) = m.probe_zone.clone() else {
                continue;
            };
            let Some(&i) = self.monitor_index.get(&m.name) else {
                continue;
            };
            let path = format!("monitors[{i}].probe_zone");
            if !matches!(m.kind, MonitorKind::Http(_) | MonitorKind::Https(_)) {
                self.sink.push(
                    path,
                    "only http and https monitors probe as a zone's proxied traffic",
                );
                continue;
            }
            let wanted = zone_name.trim_end_matches('.').to_ascii_lowercase();
            let Some(zone) = zones.iter().find(|z| z.name == wanted) else {
                let known: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
                self.sink.push(
                    path,
                    format!("no zone `{zone_name}` (zones: {})", known.join(", ")),
                );
                continue;
            };
            let proxied: Vec<&LoadBalancer> = lbs
                .iter()
                .filter(|lb| lb.proxied_http() && zone.contains(&lb.name))
                .collect();
            let Some(first) = proxied.first() else {
                self.sink.push(
                    path,
                    format!(
                        "zone `{}` has no proxied HTTP load balancer to probe as",
                        zone.name
                    ),
                );
                continue;
            };
            let tls = first.origin_tls_settings();
            if let Some(other) = proxied.iter().find(|lb| lb.origin_tls_settings() != tls) {
                self.sink.push(
                    path,
                    format!(
                        "the proxied load balancers of zone `{}` reach origins differently ({} and {}: origin_tls, origin_ca_file or origin_client_cert): a monitor probes one way",
                        zone.name, first.name, other.name
                    ),
                );
                continue;
            }
            m.zone_tls = Some(tls);
        }
    }
}
