//! Round-trip times between the 13 regions (`regions.toml`): from each region's rough centre,
//! the great-circle distance at two thirds of the speed of light in fibre with a 1.5 path
//! stretch, plus 10 ms of access and queueing, clamped to 20–300 ms. Within a region: 20 ms.

/// The 13 region codes, in `lb_core::Region::ALL` order.
pub const CODES: [&str; 13] = [
    "WNAM", "ENAM", "WEU", "EEU", "NSAM", "SSAM", "OC", "ME", "NAF", "SAF", "SAS", "SEAS", "NEAS",
];

/// Each region's rough centre (latitude, longitude in degrees), indexed like [`CODES`].
const CENTRES: [(f64, f64); 13] = [
    (37.4, -122.0), // WNAM: San Francisco Bay
    (39.0, -77.5),  // ENAM: Ashburn
    (50.1, 8.7),    // WEU: Frankfurt
    (52.2, 21.0),   // EEU: Warsaw
    (4.7, -74.1),   // NSAM: Bogotá
    (-23.5, -46.6), // SSAM: São Paulo
    (-33.9, 151.2), // OC: Sydney
    (25.2, 55.3),   // ME: Dubai
    (30.0, 31.2),   // NAF: Cairo
    (-26.2, 28.0),  // SAF: Johannesburg
    (19.1, 72.9),   // SAS: Mumbai
    (1.35, 103.8),  // SEAS: Singapore
    (35.7, 139.7),  // NEAS: Tokyo
];

pub const MIN_RTT_MS: f64 = 20.0;
pub const MAX_RTT_MS: f64 = 300.0;

/// The round-trip time between regions `a` and `b` (indices into [`CODES`]), in ms.
pub fn rtt_ms(a: usize, b: usize) -> f64 {
    if a == b {
        return MIN_RTT_MS;
    }
    let ((la, oa), (lb, ob)) = (CENTRES[a], CENTRES[b]);
    let (la, oa, lb, ob) = (
        la.to_radians(),
        oa.to_radians(),
        lb.to_radians(),
        ob.to_radians(),
    );
    let h = ((lb - la) / 2.0).sin().powi(2) + la.cos() * lb.cos() * ((ob - oa) / 2.0).sin().powi(2);
    let km = 2.0 * 6371.0 * h.sqrt().asin();
    // Light in fibre covers ~200 km per ms; there and back, stretched by the path.
    let rtt = 10.0 + 2.0 * km * 1.5 / 200.0;
    rtt.clamp(MIN_RTT_MS, MAX_RTT_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_trip_is_within_20_and_300_ms_and_symmetric() {
        for a in 0..13 {
            for b in 0..13 {
                let r = rtt_ms(a, b);
                assert!((MIN_RTT_MS..=MAX_RTT_MS).contains(&r), "{a} {b} {r}");
                assert!((r - rtt_ms(b, a)).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn neighbours_are_close_and_antipodes_far() {
        let (weu, eeu, oc, ssam) = (2, 3, 6, 5);
        assert!(rtt_ms(weu, eeu) < 40.0, "{}", rtt_ms(weu, eeu));
        assert!(rtt_ms(oc, ssam) > 200.0, "{}", rtt_ms(oc, ssam));
    }
}
