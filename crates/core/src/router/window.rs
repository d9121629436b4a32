//! A pool's allowance window: when the subscription's counter resets.
//!
//! The format is one short string, `PERIOD [RESET]`, all times UTC:
//!
//! | written                         | resets                                       |
//! |---------------------------------|----------------------------------------------|
//! | `weekly` (the default)          | every Monday 00:00                           |
//! | `weekly thu 09:30`, `weekly fri`| every Thursday 09:30, every Friday 00:00     |
//! | `daily`, `daily 06:00`          | every day at 00:00 / 06:00                   |
//! | `monthly`, `monthly 15 08:00`   | the 1st / the 15th at 08:00 (a day past a short month's end resets on its last day) |
//! | `weekly 2026-12-03T09:00:00+01:00` | an RFC 3339 anchor: the same weekday and time (here Thursday 08:00 UTC) |
//!
//! The reset can also be given on its own (`Window::parse("weekly", Some("thu 09:30"))`),
//! which is how the config's `window = "weekly"` plus `reset = "thu 09:30"` reads. An
//! anchor is only a way to say the reset: it is turned into weekday (or day of month)
//! and time at parse time, so `weekly <anchor>` and fixed seven-day periods counted from
//! the anchor are the same thing (UTC has no daylight-saving jumps).

use std::fmt;
use std::str::FromStr;

use jiff::civil::{Date, DateTime, Time, Weekday};
use jiff::tz::Offset;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::RouterError;
use crate::ids::Timestamp;

/// The time of day a window resets, UTC, to the minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClockTime {
    hour: u8,
    minute: u8,
}

impl ClockTime {
    pub const MIDNIGHT: ClockTime = ClockTime { hour: 0, minute: 0 };

    /// `None` unless `hour < 24` and `minute < 60`.
    pub fn new(hour: u8, minute: u8) -> Option<Self> {
        (hour < 24 && minute < 60).then_some(ClockTime { hour, minute })
    }

    pub fn hour(self) -> u8 {
        self.hour
    }

    pub fn minute(self) -> u8 {
        self.minute
    }

    fn time(self) -> Time {
        // In range by construction; `Time::MIN` is never reached.
        Time::new(self.hour as i8, self.minute as i8, 0, 0).unwrap_or(Time::MIN)
    }
}

impl fmt::Display for ClockTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.hour, self.minute)
    }
}

/// When a pool's allowance resets. See the module documentation for the written form,
/// which is also the serialised form (`"weekly mon 00:00"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Window {
    Daily {
        at: ClockTime,
    },
    Weekly {
        on: Weekday,
        at: ClockTime,
    },
    /// `day` is 1 to 31; in a month without that day the window resets on its last day.
    Monthly {
        day: u8,
        at: ClockTime,
    },
}

impl Default for Window {
    /// Weekly, Monday 00:00 UTC: how most subscriptions count.
    fn default() -> Self {
        Window::Weekly {
            on: Weekday::Monday,
            at: ClockTime::MIDNIGHT,
        }
    }
}

impl Window {
    /// Reads the config's two keys: `window` (a period, optionally with its reset) and an
    /// optional separate `reset`.
    pub fn parse(window: &str, reset: Option<&str>) -> Result<Window, RouterError> {
        match reset {
            Some(reset) => format!("{} {}", window.trim(), reset.trim()).parse(),
            None => window.parse(),
        }
    }

    /// The window that holds `now`: `start <= now < end`.
    ///
    /// Fails only for an instant outside the years -9999 to 9999 (a corrupt clock).
    pub fn bounds(&self, now: Timestamp) -> Result<(Timestamp, Timestamp), RouterError> {
        let out_of_range = |_| RouterError::OutOfRange { at: now };
        let at = jiff::Timestamp::from_millisecond(now.0).map_err(out_of_range)?;
        let today = Offset::UTC.to_datetime(at);
        let (start, end) = self.civil_bounds(today).map_err(out_of_range)?;
        let start = instant(start).map_err(out_of_range)?;
        let end = instant(end).map_err(out_of_range)?;
        Ok((start, end))
    }

    fn civil_bounds(&self, now: DateTime) -> Result<(DateTime, DateTime), jiff::Error> {
        let date = now.date();
        match *self {
            Window::Daily { at } => {
                let mut start = date.to_datetime(at.time());
                if start > now {
                    start = date.yesterday()?.to_datetime(at.time());
                }
                Ok((start, start.date().tomorrow()?.to_datetime(at.time())))
            }
            Window::Weekly { on, at } => {
                let back = (date.weekday().to_monday_zero_offset() - on.to_monday_zero_offset())
                    .rem_euclid(7);
                let mut start = days_before(date, back)?.to_datetime(at.time());
                if start > now {
                    start = days_before(start.date(), 7)?.to_datetime(at.time());
                }
                Ok((start, days_after(start.date(), 7)?.to_datetime(at.time())))
            }
            Window::Monthly { day, at } => {
                let mut start = day_of_month(date, day)?.to_datetime(at.time());
                if start > now {
                    let previous = date.first_of_month().yesterday()?;
                    start = day_of_month(previous, day)?.to_datetime(at.time());
                }
                let next = start.date().last_of_month().tomorrow()?;
                Ok((start, day_of_month(next, day)?.to_datetime(at.time())))
            }
        }
    }
}

fn instant(at: DateTime) -> Result<Timestamp, jiff::Error> {
    Ok(Timestamp(Offset::UTC.to_timestamp(at)?.as_millisecond()))
}

fn days_before(date: Date, days: i8) -> Result<Date, jiff::Error> {
    date.checked_sub(jiff::Span::new().days(days))
}

fn days_after(date: Date, days: i8) -> Result<Date, jiff::Error> {
    date.checked_add(jiff::Span::new().days(days))
}

/// `day` of `date`'s month, or the month's last day when it is shorter.
fn day_of_month(date: Date, day: u8) -> Result<Date, jiff::Error> {
    let day = (day as i8).min(date.days_in_month());
    Date::new(date.year(), date.month(), day)
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Window::Daily { at } => write!(f, "daily {at}"),
            Window::Weekly { on, at } => write!(f, "weekly {} {at}", weekday_name(*on)),
            Window::Monthly { day, at } => write!(f, "monthly {day} {at}"),
        }
    }
}

const WEEKDAYS: [(&str, &str, Weekday); 7] = [
    ("mon", "monday", Weekday::Monday),
    ("tue", "tuesday", Weekday::Tuesday),
    ("wed", "wednesday", Weekday::Wednesday),
    ("thu", "thursday", Weekday::Thursday),
    ("fri", "friday", Weekday::Friday),
    ("sat", "saturday", Weekday::Saturday),
    ("sun", "sunday", Weekday::Sunday),
];

fn weekday_name(day: Weekday) -> &'static str {
    WEEKDAYS
        .iter()
        .find(|(_, _, d)| *d == day)
        .map_or("mon", |(name, _, _)| name)
}

/// `mon` … `sun`, or the full English name, any case.
fn parse_weekday(word: &str) -> Option<Weekday> {
    let word = word.to_ascii_lowercase();
    WEEKDAYS
        .iter()
        .find(|(short, full, _)| word == *short || word == *full)
        .map(|(_, _, day)| *day)
}

/// `HH:MM`, 24-hour.
fn parse_clock(word: &str) -> Option<ClockTime> {
    let (hour, minute) = word.split_once(':')?;
    if hour.is_empty() || hour.len() > 2 || minute.len() != 2 {
        return None;
    }
    ClockTime::new(hour.parse().ok()?, minute.parse().ok()?)
}

/// An RFC 3339 instant with its offset, turned into UTC; kept to the minute.
fn parse_anchor(spec: &str, word: &str) -> Result<Option<DateTime>, RouterError> {
    let Ok(at) = word.parse::<jiff::Timestamp>() else {
        return Ok(None);
    };
    let at = Offset::UTC.to_datetime(at);
    if at.second() != 0 || at.subsec_nanosecond() != 0 {
        return Err(RouterError::BadWindow {
            spec: spec.to_string(),
            detail: "a reset is kept to the minute; give the anchor with :00 seconds".into(),
        });
    }
    Ok(Some(at))
}

fn clock_of(at: DateTime) -> ClockTime {
    ClockTime::new(at.hour() as u8, at.minute() as u8).unwrap_or(ClockTime::MIDNIGHT)
}

impl FromStr for Window {
    type Err = RouterError;

    fn from_str(spec: &str) -> Result<Window, RouterError> {
        let bad = |detail: &str| RouterError::BadWindow {
            spec: spec.to_string(),
            detail: detail.to_string(),
        };
        let words: Vec<&str> = spec.split_whitespace().collect();
        let Some((period, reset)) = words.split_first() else {
            return Err(bad("write daily, weekly or monthly"));
        };
        let anchor = match reset {
            [one] => parse_anchor(spec, one)?,
            _ => None,
        };
        let clock = |word: Option<&&str>| match word {
            None => Ok(ClockTime::MIDNIGHT),
            Some(word) => {
                parse_clock(word).ok_or_else(|| bad("a time of day is HH:MM, e.g. 09:30"))
            }
        };
        match period.to_ascii_lowercase().as_str() {
            "daily" => match (anchor, reset) {
                (Some(at), _) => Ok(Window::Daily { at: clock_of(at) }),
                (None, [] | [_]) => Ok(Window::Daily {
                    at: clock(reset.first())?,
                }),
                _ => Err(bad("a daily reset is one time of day, e.g. daily 06:00")),
            },
            "weekly" => {
                if let Some(at) = anchor {
                    return Ok(Window::Weekly {
                        on: at.weekday(),
                        at: clock_of(at),
                    });
                }
                let (on, time) = match reset {
                    [] => (Weekday::Monday, None),
                    [word] if word.contains(':') => (Weekday::Monday, Some(word)),
                    [day, rest @ ..] if rest.len() <= 1 => (
                        parse_weekday(day).ok_or_else(|| {
                            bad("a weekday is mon, tue, wed, thu, fri, sat or sun")
                        })?,
                        rest.first(),
                    ),
                    _ => {
                        return Err(bad(
                            "a weekly reset is a weekday and a time, e.g. weekly mon 09:00",
                        ));
                    }
                };
                Ok(Window::Weekly {
                    on,
                    at: clock(time)?,
                })
            }
            "monthly" => {
                if let Some(at) = anchor {
                    return Ok(Window::Monthly {
                        day: at.day() as u8,
                        at: clock_of(at),
                    });
                }
                let (day, time) = match reset {
                    [] => (1, None),
                    [word] if word.contains(':') => (1, Some(word)),
                    [day, rest @ ..] if rest.len() <= 1 => (
                        day.parse::<u8>()
                            .ok()
                            .filter(|d| (1..=31).contains(d))
                            .ok_or_else(|| bad("a day of the month is 1 to 31"))?,
                        rest.first(),
                    ),
                    _ => {
                        return Err(bad(
                            "a monthly reset is a day and a time, e.g. monthly 1 09:00",
                        ));
                    }
                };
                Ok(Window::Monthly {
                    day,
                    at: clock(time)?,
                })
            }
            _ => Err(bad("the period is daily, weekly or monthly")),
        }
    }
}

impl Serialize for Window {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spec = String::deserialize(deserializer)?;
        spec.parse().map_err(serde::de::Error::custom)
    }
}
