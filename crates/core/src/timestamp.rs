//! Wall-clock timestamps in UTC, formatted without a date crate.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in wall-clock time; displays as RFC 3339 UTC (`2026-11-22T05:21:30.123Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(SystemTime);

impl Timestamp {
    pub fn now() -> Self {
        Timestamp(SystemTime::now())
    }

    /// `HH:MM:SS.mmm`, for log lines.
    pub(crate) fn clock(&self) -> String {
        let (secs, millis) = self.parts();
        let day = secs % 86_400;
        format!(
            "{:02}:{:02}:{:02}.{millis:03}",
            day / 3600,
            day / 60 % 60,
            day % 60
        )
    }

    /// Time elapsed from `earlier` to `self` (zero if the clock went backwards).
    pub fn since(&self, earlier: Timestamp) -> Duration {
        self.0.duration_since(earlier.0).unwrap_or_default()
    }

    fn parts(&self) -> (u64, u32) {
        let d = self.0.duration_since(UNIX_EPOCH).unwrap_or_default();
        (d.as_secs(), d.subsec_millis())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (secs, millis) = self.parts();
        let (year, month, day) = civil_from_days((secs / 86_400) as i64);
        write!(f, "{year:04}-{month:02}-{day:02}T{}Z", {
            let s = secs % 86_400;
            format!(
                "{:02}:{:02}:{:02}.{millis:03}",
                s / 3600,
                s / 60 % 60,
                s % 60
            )
        })
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Time from now until an HTTP date (RFC 9110's IMF-fixdate, `Sun, 06 Nov 1994
/// 08:49:37 GMT`, the form servers send in `Retry-After`); zero for a date passed,
/// None for anything else (the obsolete forms included: a caller falls back).
pub fn until_http_date(text: &str) -> Option<Duration> {
    let at = http_date(text)?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

fn http_date(text: &str) -> Option<SystemTime> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [weekday, day, month, year, time, "GMT"] = parts[..] else {
        return None;
    };
    if !weekday.ends_with(',') || day.len() != 2 || year.len() != 4 {
        return None;
    }
    let number = |s: &str| -> Option<u64> {
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse().ok())
            .flatten()
    };
    let day = number(day).filter(|d| (1..=31).contains(d))?;
    let month = MONTHS.iter().position(|m| *m == month)? as u64 + 1;
    let year = number(year).filter(|y| *y >= 1970)?;
    let [h, m, s] = time.split(':').collect::<Vec<_>>()[..] else {
        return None;
    };
    if [h, m, s].iter().any(|part| part.len() != 2) {
        return None;
    }
    let (h, m, s) = (number(h)?, number(m)?, number(s)?);
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(year as i64, month as u32, day as u32);
    let secs = u64::try_from(days).ok()? * 86_400 + h * 3600 + m * 60 + s;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// (year, month, day) → days since 1970-01-01, the inverse of `civil_from_days`.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `1.234 s`, `850 ms`, `2 min 5 s`: durations for people.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        let secs = d.as_secs();
        format!("{} min {} s", secs / 60, secs % 60)
    }
}

/// `2026-11-22T05:31:30.123Z` → `2026-11-22 05:31:30`: a stored time for a table
/// or a page (other text is cut the same way, whatever it is).
pub fn short(rfc3339: &str) -> String {
    rfc3339
        .chars()
        .take(19)
        .collect::<String>()
        .replacen('T', " ", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_times_drop_the_fraction_and_the_zone() {
        assert_eq!(short("2026-11-22T05:31:30.123Z"), "2026-11-22 05:31:30");
        assert_eq!(short("ア"), "ア", "any text, never a panic");
    }

    fn at(secs: u64, millis: u64) -> Timestamp {
        Timestamp(UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis))
    }

    #[test]
    fn formats_rfc3339_utc() {
        assert_eq!(at(0, 0).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5).to_string(), "2000-02-29T00:00:00.005Z");
        assert_eq!(
            at(1_795_325_490, 123).to_string(),
            "2026-11-22T05:31:30.123Z"
        );
        assert_eq!(at(1_795_325_490, 123).clock(), "05:31:30.123");
    }

    #[test]
    fn http_dates_are_read_in_their_one_current_form() {
        let read =
            |text: &str| http_date(text).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(read("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(read("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(read("Tue, 29 Feb 2000 00:00:00 GMT"), Some(951_782_400));
        for other in [
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, +6 Nov 1994 08:49:37 GMT",
            "120",
            "",
        ] {
            assert_eq!(read(other), None, "{other}");
        }
        assert_eq!(
            until_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn human_durations() {
        assert_eq!(human(Duration::from_millis(850)), "850 ms");
        assert_eq!(human(Duration::from_millis(1234)), "1.2 s");
        assert_eq!(human(Duration::from_secs(125)), "2 min 5 s");
    }
}
