//! Helpers the subcommands' clap arguments share. The core types (`Task`, `Loss`, `Method`)
//! know nothing of clap; here they become argument parsers that list their values in `--help`.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::fmt::Display;
use std::str::FromStr;

/// A parser for a core enum: `names` are the values `--help` lists and the shell completes;
/// parsing itself is the type's `FromStr`, so the CLI and the config file accept the same text.
pub fn enum_parser<T>(
    names: impl IntoIterator<Item = &'static str>,
) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: Display,
{
    PossibleValuesParser::new(names).try_map(|s| s.parse::<T>().map_err(|e| e.to_string()))
}
