//! A serializer that writes nothing and only looks for non-finite floats.
//!
//! `serde_json` turns `NaN` and `±Infinity` into `null` without a word. proctor's rule is that
//! JSON never holds Infinity or NaN and that a number is never silently lost, so every value is
//! walked by [`check_finite`] before it is written, and a non-finite float is an error that names
//! where it was (`$.metrics.rate`, `$.trials[3]`).

use serde::ser::{self, Serialize};
use std::fmt;

/// Where in a value a non-finite float was found, as a JSONPath-like string (`$.a.b[2]`).
#[derive(Debug)]
pub(crate) struct NonFinite {
    pub(crate) path: String,
}

/// The probe's error: either the non-finite float it was looking for, or a `Serialize` impl's own
/// custom error (which `serde_json` would also have reported).
#[derive(Debug)]
pub(crate) enum ProbeError {
    NonFinite(NonFinite),
    Custom(String),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::NonFinite(n) => write!(f, "non-finite float at {}", n.path),
            ProbeError::Custom(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ProbeError {}

impl ser::Error for ProbeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ProbeError::Custom(msg.to_string())
    }
}

/// Walks `value` and fails at the first `f32`/`f64` that is NaN or infinite.
///
/// Custom serialization errors are ignored here: `serde_json` reports them itself, with its own
/// message, when the value is written.
pub(crate) fn check_finite<T: Serialize + ?Sized>(value: &T) -> Result<(), NonFinite> {
    let mut probe = Probe {
        path: vec![Segment::Root],
    };
    match value.serialize(&mut probe) {
        Err(ProbeError::NonFinite(n)) => Err(n),
        Ok(()) | Err(ProbeError::Custom(_)) => Ok(()),
    }
}

enum Segment {
    Root,
    Key(String),
    Index(usize),
}

struct Probe {
    path: Vec<Segment>,
}

impl Probe {
    fn render(&self) -> String {
        let mut out = String::new();
        for seg in &self.path {
            match seg {
                Segment::Root => out.push('$'),
                Segment::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Segment::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        out
    }

    fn float(&mut self, v: f64) -> Result<(), ProbeError> {
        if v.is_finite() {
            Ok(())
        } else {
            Err(ProbeError::NonFinite(NonFinite {
                path: self.render(),
            }))
        }
    }

    fn nested<T: Serialize + ?Sized>(&mut self, seg: Segment, value: &T) -> Result<(), ProbeError> {
        self.path.push(seg);
        let r = value.serialize(&mut *self);
        self.path.pop();
        r
    }
}

/// Renders a map key for the error path; keys that are not plain scalars show as `?`.
fn key_name<T: Serialize + ?Sized>(key: &T) -> String {
    match serde_json::to_value(key) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(serde_json::Value::Number(n)) => n.to_string(),
        Ok(serde_json::Value::Bool(b)) => b.to_string(),
        _ => "?".to_string(),
    }
}

/// State of a sequence-like compound (seq, tuple, tuple struct, tuple variant).
struct SeqProbe<'a> {
    probe: &'a mut Probe,
    index: usize,
}

/// State of a map-like compound (map, struct, struct variant).
struct MapProbe<'a> {
    probe: &'a mut Probe,
    key: String,
}

impl<'a> ser::Serializer for &'a mut Probe {
    type Ok = ();
    type Error = ProbeError;
    type SerializeSeq = SeqProbe<'a>;
    type SerializeTuple = SeqProbe<'a>;
    type SerializeTupleStruct = SeqProbe<'a>;
    type SerializeTupleVariant = SeqProbe<'a>;
    type SerializeMap = MapProbe<'a>;
    type SerializeStruct = MapProbe<'a>;
    type SerializeStructVariant = MapProbe<'a>;

    fn serialize_bool(self, _: bool) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), ProbeError> {
        self.float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), ProbeError> {
        self.float(v)
    }
    fn serialize_char(self, _: char) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), ProbeError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), ProbeError> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), ProbeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), ProbeError> {
        self.nested(Segment::Key(variant.to_string()), value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<SeqProbe<'a>, ProbeError> {
        Ok(SeqProbe {
            probe: self,
            index: 0,
        })
    }
    fn serialize_tuple(self, _: usize) -> Result<SeqProbe<'a>, ProbeError> {
        Ok(SeqProbe {
            probe: self,
            index: 0,
        })
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<SeqProbe<'a>, ProbeError> {
        Ok(SeqProbe {
            probe: self,
            index: 0,
        })
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<SeqProbe<'a>, ProbeError> {
        self.path.push(Segment::Key(variant.to_string()));
        Ok(SeqProbe {
            probe: self,
            index: 0,
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<MapProbe<'a>, ProbeError> {
        Ok(MapProbe {
            probe: self,
            key: String::new(),
        })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<MapProbe<'a>, ProbeError> {
        Ok(MapProbe {
            probe: self,
            key: String::new(),
        })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<MapProbe<'a>, ProbeError> {
        self.path.push(Segment::Key(variant.to_string()));
        Ok(MapProbe {
            probe: self,
            key: String::new(),
        })
    }
}

impl SeqProbe<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ProbeError> {
        let i = self.index;
        self.index += 1;
        self.probe.nested(Segment::Index(i), value)
    }
}

impl ser::SerializeSeq for SeqProbe<'_> {
    type Ok = ();
    type Error = ProbeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ProbeError> {
        self.element(value)
    }
    fn end(self) -> Result<(), ProbeError> {
        Ok(())
    }
}

impl ser::SerializeTuple for SeqProbe<'_> {
    type Ok = ();
    type Error = ProbeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ProbeError> {
        self.element(value)
    }
    fn end(self) -> Result<(), ProbeError> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for SeqProbe<'_> {
    type Ok = ();
    type Error = ProbeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ProbeError> {
        self.element(value)
    }
    fn end(self) -> Result<(), ProbeError> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for SeqProbe<'_> {
    type Ok = ();
    type Error = ProbeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ProbeError> {
        self.element(value)
    }
    fn end(self) -> Result<(), ProbeError> {
        self.probe.path.pop();
        Ok(())
    }
}

impl ser::SerializeMap for MapProbe<'_> {
    type Ok = ();
    type Error = ProbeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), ProbeError> {
        self.key = key_name(key);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ProbeError> {
        let key = std::mem::take(&mut self.key);
        self.probe.nested(Segment::Key(key), value)
    }
    fn end(self) -> Result<(), ProbeError> {
        Ok(())
    }
}

impl ser::SerializeStruct for MapProbe<'_> {
    type Ok = ();
    type Error = ProbeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), ProbeError> {
        self.probe.nested(Segment::Key(key.to_string()), value)
    }
    fn end(self) -> Result<(), ProbeError> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for MapProbe<'_> {
    type Ok = ();
    type Error = ProbeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), ProbeError> {
        self.probe.nested(Segment::Key(key.to_string()), value)
    }
    fn end(self) -> Result<(), ProbeError> {
        self.probe.path.pop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    struct Inner {
        rate: f64,
    }

    #[derive(Serialize)]
    struct Outer {
        name: String,
        cells: Vec<Inner>,
        by_key: BTreeMap<String, f32>,
    }

    #[test]
    fn finite_values_pass() {
        let v = Outer {
            name: "x".into(),
            cells: vec![Inner { rate: 0.5 }],
            by_key: BTreeMap::from([("a".to_string(), 1.0)]),
        };
        assert!(check_finite(&v).is_ok());
        assert!(check_finite(&serde_json::json!({"a": [1, 2.5, null]})).is_ok());
    }

    #[test]
    fn nan_in_a_list_is_located() {
        let v = Outer {
            name: "x".into(),
            cells: vec![Inner { rate: 0.5 }, Inner { rate: f64::NAN }],
            by_key: BTreeMap::new(),
        };
        let err = check_finite(&v).err().map(|e| e.path);
        assert_eq!(err.as_deref(), Some("$.cells[1].rate"));
    }

    #[test]
    fn infinity_in_a_map_is_located() {
        let v = Outer {
            name: "x".into(),
            cells: vec![],
            by_key: BTreeMap::from([("lift".to_string(), f32::NEG_INFINITY)]),
        };
        let err = check_finite(&v).err().map(|e| e.path);
        assert_eq!(err.as_deref(), Some("$.by_key.lift"));
        assert_eq!(
            check_finite(&f64::INFINITY)
                .err()
                .map(|e| e.path)
                .as_deref(),
            Some("$")
        );
    }
}
