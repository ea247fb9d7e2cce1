//! The instants in proctor's records: [`jiff::Timestamp`]s, written as RFC 3339 UTC to the
//! millisecond (`2026-11-29T22:15:03.123Z`), the text `run.json` has always held. That text
//! sorts as time does.
//!
//! The [`millis`] and [`millis_opt`] modules are for `#[serde(with = ...)]` on a
//! `Timestamp` and an `Option<Timestamp>`; they read any RFC 3339 instant.

use jiff::Timestamp;

/// Now, to the millisecond (truncated, as the text records it).
pub fn now_millis() -> Timestamp {
    to_millis(Timestamp::now())
}

/// `t` truncated to the millisecond.
pub fn to_millis(t: Timestamp) -> Timestamp {
    Timestamp::from_millisecond(t.as_millisecond()).unwrap_or(t)
}

/// `t` as records write it: `2026-11-29T22:15:03.123Z`.
pub fn format_millis(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Serde for a [`Timestamp`] written as [`format_millis`] writes it.
pub mod millis {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `t` as RFC 3339 UTC to the millisecond.
    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_millis(*t))
    }

    /// Reads an RFC 3339 instant.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(|e| {
            serde::de::Error::custom(format_args!(
                "`{text}` is not an RFC 3339 instant (e.g. 2026-11-29T22:15:03.123Z): {e}"
            ))
        })
    }
}

/// Serde for an `Option<Timestamp>`: `null`, or [`millis`]'s text.
pub mod millis_opt {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `null` or the instant.
    pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => super::millis::serialize(t, s),
            None => s.serialize_none(),
        }
    }

    /// Reads `null` or an RFC 3339 instant.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        #[derive(Deserialize)]
        struct Millis(#[serde(with = "super::millis")] Timestamp);
        Ok(Option::<Millis>::deserialize(d)?.map(|m| m.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Times {
        #[serde(with = "millis")]
        at: Timestamp,
        #[serde(default, with = "millis_opt")]
        until: Option<Timestamp>,
    }

    #[test]
    fn instants_read_and_write_the_text_run_json_holds() {
        let text = r#"{"at":"2026-11-29T22:15:03.042Z","until":null}"#;
        let times: Times = serde_json::from_str(text).unwrap();
        assert_eq!(times.at.as_millisecond(), 1_795_990_503_042);
        assert_eq!(serde_json::to_string(&times).unwrap(), text);
        let later = r#"{"at":"2000-02-29T12:34:56.000Z","until":"2000-02-29T12:34:56.999Z"}"#;
        let times: Times = serde_json::from_str(later).unwrap();
        assert_eq!(serde_json::to_string(&times).unwrap(), later);
        let err = serde_json::from_str::<Times>(r#"{"at":"yesterday"}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("`yesterday` is not an RFC 3339 instant"),
            "{err}"
        );
        let now = now_millis();
        assert_eq!(now.subsec_nanosecond() % 1_000_000, 0);
        assert_eq!(format_millis(now).parse::<Timestamp>().unwrap(), now);
    }
}
