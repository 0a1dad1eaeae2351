//! Line and column of a key or value in the YAML text, found by its path. A parsed
//! `serde_norway::Value` has no positions, and serde_norway tells a position only with an
//! error: so we deserialize the text once more, walk to the path, and raise an error
//! there; serde_norway marks it with the position of the node being read.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// What to point at: the last key of the path, or its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Key,
    Value,
}

/// The message of the error we raise; any other error means "not found".
const HERE: &str = "agent-runner: located";

/// 1-based (line, column) of `path` in `text`, if it can be found.
pub fn locate(text: &str, path: &[Segment], target: Target) -> Option<(usize, usize)> {
    let de = serde_norway::Deserializer::from_str(text);
    match (Finder { path, target }).deserialize(de) {
        Err(e) if e.to_string().contains(HERE) => e.location().map(|l| (l.line(), l.column())),
        _ => None,
    }
}

struct Finder<'p> {
    path: &'p [Segment],
    target: Target,
}

impl<'de> DeserializeSeed<'de> for Finder<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Finder<'_> {
    fn scalar<E: de::Error>(&self) -> Result<(), E> {
        if self.path.is_empty() {
            Err(E::custom(HERE))
        } else {
            Ok(())
        }
    }
}

impl<'de> Visitor<'de> for Finder<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Segment::Key(want), rest)) = self.path.split_first() else {
            return self.scalar();
        };
        let at_key = rest.is_empty() && self.target == Target::Key;
        while let Some(found) = map.next_key_seed(KeyFinder { want, at_key })? {
            if found {
                return map.next_value_seed(Finder {
                    path: rest,
                    target: self.target,
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Segment::Index(want), rest)) = self.path.split_first() else {
            return self.scalar();
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Finder {
            path: rest,
            target: self.target,
        })
        .map(|_| ())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.scalar()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.scalar()
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
}

/// Reads one mapping key; true when it is the one wanted. Raises `HERE` in the key
/// itself when the key is the target, so the error carries the key's position.
struct KeyFinder<'a> {
    want: &'a str,
    at_key: bool,
}

impl<'de> DeserializeSeed<'de> for KeyFinder<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyFinder<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        match (key == self.want, self.at_key) {
            (true, true) => Err(E::custom(HERE)),
            (found, _) => Ok(found),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Segment {
        Segment::Key(k.into())
    }

    #[test]
    fn finds_keys_and_values_in_block_and_flow_style() {
        let text = "version: 1\ntask: {prd: {text: x}}\nrunner:\n  meta:\n    max_loop: 3\n  worker:\n    extra_args: [a, [b], c]\n";
        let path = [key("runner"), key("meta"), key("max_loop")];
        assert_eq!(locate(text, &path, Target::Key), Some((5, 5)));
        assert_eq!(locate(text, &path, Target::Value), Some((5, 15)));
        let path = [key("task"), key("prd"), key("text")];
        assert_eq!(locate(text, &path, Target::Value), Some((2, 20)));
        let path = [
            key("runner"),
            key("worker"),
            key("extra_args"),
            Segment::Index(1),
        ];
        assert_eq!(locate(text, &path, Target::Value), Some((7, 21)));
    }

    #[test]
    fn missing_paths_have_no_location() {
        let text = "a: {b: 1}\n";
        assert_eq!(locate(text, &[key("a"), key("c")], Target::Key), None);
        assert_eq!(locate(text, &[key("x")], Target::Value), None);
        assert_eq!(
            locate(text, &[key("a"), Segment::Index(0)], Target::Value),
            None
        );
        assert_eq!(locate("- 1\n", &[Segment::Index(3)], Target::Value), None);
    }
}
