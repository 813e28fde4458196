//! Timestamps as the two formats write them: RFC 3339 UTC with milliseconds (JSON) and the
//! Common Log Format's `10/Oct/2000:13:55:36 +0000` (combined).

use std::time::{SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

struct Parts {
    year: i64,
    month: u32,
    day: u32,
    hour: u64,
    minute: u64,
    second: u64,
}

fn parts(t: SystemTime) -> Parts {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = civil(i64::try_from(secs / 86_400).unwrap_or(0));
    let of_day = secs % 86_400;
    Parts {
        year,
        month,
        day,
        hour: of_day / 3600,
        minute: of_day % 3600 / 60,
        second: of_day % 60,
    }
}

/// `2026-12-03T14:03:07.123Z`
pub fn rfc3339(t: SystemTime) -> String {
    Rfc3339(t).to_string()
}

/// [`rfc3339`] as `Display`, with no allocation: the date and time of the last second written
/// on this thread are kept, so a busy log formats only the milliseconds of most records.
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339(pub SystemTime);

thread_local! {
    /// The last second formatted on this thread, and its `YYYY-MM-DDTHH:MM:SS`.
    static SECOND: std::cell::Cell<(u64, [u8; 19])> = const { std::cell::Cell::new((u64::MAX, [0; 19])) };
}

impl std::fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let since = self.0.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = since.as_secs();
        let (cached, mut text) = SECOND.get();
        if cached != secs {
            let p = parts(self.0);
            use std::io::Write;
            let _ = write!(
                &mut text[..],
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
                p.year,
                p.month,
                p.day,
                p.hour,
                p.minute,
                p.second
            );
            SECOND.set((secs, text));
        }
        let prefix = std::str::from_utf8(&text).unwrap_or("1970-01-01T00:00:00");
        write!(f, "{prefix}.{:03}Z", since.subsec_millis())
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `03/Dec/2026:14:03:07 +0000`
pub fn common_log(t: SystemTime) -> String {
    let p = parts(t);
    let month = MONTHS[(p.month as usize).saturating_sub(1) % 12];
    format!(
        "{:02}/{month}/{:04}:{:02}:{:02}:{:02} +0000",
        p.day, p.year, p.hour, p.minute, p.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_written_in_both_formats() {
        let t = UNIX_EPOCH + Duration::from_millis(1_796_306_587_123);
        assert_eq!(rfc3339(t), "2026-12-03T14:03:07.123Z");
        assert_eq!(common_log(t), "03/Dec/2026:14:03:07 +0000");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(common_log(leap), "29/Feb/2000:00:00:00 +0000");
    }
}
