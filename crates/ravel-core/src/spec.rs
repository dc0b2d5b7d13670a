//! Settings written as a table or as a one-line shorthand, read by one parser.
//!
//! A weight schedule, a synthetic design or a demo feature design is a small struct with
//! serde's derive (`deny_unknown_fields`): a config file gives it as a TOML table, and the
//! command line (or a config file, for short) as `key=value,...`. [`from_pairs`] reads the
//! shorthand through the same derive, so both forms know the same keys and report the same
//! errors; [`string_or_table`] accepts either form in a config field, and [`Spec::check`]
//! validates the values once, whichever form they came in.

use serde::Deserializer;
use serde::de::value::{MapAccessDeserializer, MapDeserializer};
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// A setting with a table form (its serde derive) and a shorthand form.
pub trait Spec: DeserializeOwned {
    /// Parses the shorthand (the default: `key=value,...`, see [`from_pairs`]), unchecked.
    fn parse_shorthand(text: &str) -> Result<Self, String> {
        from_pairs(text)
    }
    /// Validates the values; the message names the key at fault.
    fn check(&self) -> Result<(), String>;
    /// Shorthand, then check.
    fn parse_checked(text: &str) -> Result<Self, String> {
        let spec = Self::parse_shorthand(text)?;
        spec.check()?;
        Ok(spec)
    }
}

/// Deserializes `key=value,...` (spaces around keys and values ignored, an empty text is
/// `{}`) into `T` through its serde derive: each value is parsed as the type of its field
/// (numbers, booleans, unit enum variants, `Option`s).
pub fn from_pairs<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let mut pairs = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}' is not key=value"))?;
        pairs.push((key.trim(), Text(value.trim())));
    }
    let map = MapDeserializer::<_, de::value::Error>::new(pairs.into_iter());
    T::deserialize(map).map_err(|e| e.to_string())
}

/// For `#[serde(deserialize_with = "string_or_table")]`: a string is the shorthand
/// ([`Spec::parse_shorthand`]), a table the derive; the result is checked either way.
pub fn string_or_table<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Spec,
{
    struct V<T>(PhantomData<T>);
    impl<'de, T: Spec> Visitor<'de> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a table or a shorthand string")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
            T::parse_shorthand(s).map_err(E::custom)
        }
        fn visit_map<M: de::MapAccess<'de>>(self, map: M) -> Result<T, M::Error> {
            T::deserialize(MapAccessDeserializer::new(map))
        }
    }
    let spec: T = d.deserialize_any(V(PhantomData))?;
    spec.check().map_err(de::Error::custom)?;
    Ok(spec)
}

/// One shorthand value: parsed as whatever its field asks for.
struct Text<'a>(&'a str);

impl<'de> IntoDeserializer<'de, de::value::Error> for Text<'de> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

macro_rules! parse_as {
    ($($method:ident => $visit:ident: $t:ty),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, de::value::Error> {
            match self.0.parse::<$t>() {
                Ok(x) => v.$visit(x),
                Err(_) => Err(de::Error::invalid_value(de::Unexpected::Str(self.0), &v)),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Text<'de> {
    type Error = de::value::Error;
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        v.visit_borrowed_str(self.0)
    }
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        v.visit_some(self)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        v.visit_enum(self.0.into_deserializer())
    }
    parse_as! {
        deserialize_bool => visit_bool: bool,
        deserialize_i8 => visit_i64: i64,
        deserialize_i16 => visit_i64: i64,
        deserialize_i32 => visit_i64: i64,
        deserialize_i64 => visit_i64: i64,
        deserialize_u8 => visit_u64: u64,
        deserialize_u16 => visit_u64: u64,
        deserialize_u32 => visit_u64: u64,
        deserialize_u64 => visit_u64: u64,
        deserialize_f32 => visit_f64: f64,
        deserialize_f64 => visit_f64: f64,
    }
    serde::forward_to_deserialize_any! {
        i128 u128 char str string bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct S {
        p: usize,
        rho: f64,
        n: Option<u64>,
        on: bool,
        task: crate::Task,
    }
    impl Default for S {
        fn default() -> Self {
            S {
                p: 1,
                rho: 0.5,
                n: None,
                on: false,
                task: crate::Task::Regression,
            }
        }
    }

    #[test]
    fn pairs_are_parsed_as_their_fields() {
        let s: S = from_pairs(" p = 7, rho=0.25,n=3,on=true,task=classification").unwrap();
        assert_eq!(
            s,
            S {
                p: 7,
                rho: 0.25,
                n: Some(3),
                on: true,
                task: crate::Task::Classification
            }
        );
        assert_eq!(from_pairs::<S>("").unwrap(), S::default());
        for (text, want) in [
            ("q=1", "unknown field `q`"),
            ("p=x", "invalid value: string \"x\""),
            ("p", "not key=value"),
            ("task=both", "unknown variant `both`"),
        ] {
            let e = from_pairs::<S>(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
