//! The days and months budgets are counted in (UTC).

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};

/// A moment, as the budgets see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period(pub DateTime<Utc>);

impl Period {
    pub fn now() -> Period {
        Period(Utc::now())
    }

    /// `YYYY-MM-DD`.
    pub fn day(&self) -> String {
        self.0.format("%Y-%m-%d").to_string()
    }

    /// The first day of the month, `YYYY-MM-01`.
    pub fn month_first_day(&self) -> String {
        self.0.format("%Y-%m-01").to_string()
    }

    /// When the next day starts.
    pub fn next_day(&self) -> DateTime<Utc> {
        let tomorrow = self.0.date_naive() + Duration::days(1);
        midnight(tomorrow)
    }

    /// When the next month starts.
    pub fn next_month(&self) -> DateTime<Utc> {
        let (year, month) = match self.0.month() {
            12 => (self.0.year() + 1, 1),
            m => (self.0.year(), m + 1),
        };
        midnight(NaiveDate::from_ymd_opt(year, month, 1).unwrap_or(self.0.date_naive()))
    }

    /// The first day of the month a year ago: what the ledger keeps.
    pub fn kept_from(&self) -> String {
        let year_ago =
            NaiveDate::from_ymd_opt(self.0.year() - 1, self.0.month(), 1).unwrap_or(self.0.date_naive());
        year_ago.format("%Y-%m-%d").to_string()
    }
}

fn midnight(day: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_months_turn_at_utc_midnight() {
        let at = Period(Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 0).unwrap());
        assert_eq!(at.day(), "2026-12-31");
        assert_eq!(at.month_first_day(), "2026-12-01");
        assert_eq!(at.next_day(), Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap());
        assert_eq!(
            at.next_month(),
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
        );
        let mid = Period(Utc.with_ymd_and_hms(2026, 2, 14, 12, 0, 0).unwrap());
        assert_eq!(
            mid.next_month(),
            Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()
        );
        assert_eq!(mid.kept_from(), "2025-02-01");
    }
}
