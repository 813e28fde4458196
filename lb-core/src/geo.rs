//! Coordinates and great-circle distance, for proximity steering.

/// A point on Earth in decimal degrees.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Coordinates {
    pub latitude: f64,
    pub longitude: f64,
}

/// Mean Earth radius (IUGG), kilometres.
const EARTH_RADIUS_KM: f64 = 6371.0088;

impl Coordinates {
    pub const fn new(latitude: f64, longitude: f64) -> Self {
        Coordinates {
            latitude,
            longitude,
        }
    }

    /// Great-circle distance by the haversine formula, which stays accurate for the short
    /// distances where the spherical law of cosines loses precision.
    pub fn distance_km(self, other: Coordinates) -> f64 {
        let (lat1, lat2) = (self.latitude.to_radians(), other.latitude.to_radians());
        let dlat = lat2 - lat1;
        let dlon = (other.longitude - self.longitude).to_radians();
        let a = (dlat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (dlon / 2.0).sin().powi(2);
        2.0 * EARTH_RADIUS_KM * a.sqrt().min(1.0).asin()
    }

    /// Latitude in -90..=90 and longitude in -180..=180.
    pub fn is_valid(self) -> bool {
        (-90.0..=90.0).contains(&self.latitude) && (-180.0..=180.0).contains(&self.longitude)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_distances() {
        let london = Coordinates::new(51.5074, -0.1278);
        let paris = Coordinates::new(48.8566, 2.3522);
        let sydney = Coordinates::new(-33.8688, 151.2093);
        assert!((london.distance_km(paris) - 343.5).abs() < 2.0);
        assert!((london.distance_km(sydney) - 16_990.0).abs() < 30.0);
        assert_eq!(london.distance_km(london), 0.0);
    }
}
