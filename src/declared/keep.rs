//! How a change to the API's declarations is made and kept, for every kind (streams, feature
//! streams, scorers) and for a change another replica made (`sync`): the declarations with it
//! (`staged`), kept where `Keep` says (`persist`: the whole set in `declarations.json`, or
//! the changed declaration's record in the state topic) and only then made the declarations
//! (`adopt`), or a declaration retired the same way (`retire`). Kept apart from `mod.rs`,
//! which holds the streams' own declarations, so that each kind's file says only what is its
//! own.

use super::{Declarations, Declared, Keep, Logged, Refusal, save};
use serde::Serialize;
use std::collections::BTreeMap;

/// `record` declared as `name` among the API's declarations of its kind (`of`; a PUT, or a
/// declaration another replica made): None when the same table (`table_of`) is declared now
/// (unchanged); else the declarations with `record` in its place, and whether it replaces
/// another.
pub(super) fn staged<R: Clone, T: PartialEq>(
    declared: &Declared,
    name: &str,
    record: &R,
    of: fn(&mut Declared) -> &mut BTreeMap<String, R>,
    table_of: fn(&R) -> &T,
) -> Option<(Declared, bool)> {
    let mut next = declared.clone();
    let old = of(&mut next).insert(name.to_string(), record.clone());
    if old
        .as_ref()
        .is_some_and(|o| table_of(o) == table_of(record))
    {
        return None;
    }
    Some((next, old.is_some()))
}

impl Declarations {
    /// Keeps `next`, the API's declarations with `decl` declared as `name` (`persist`, under
    /// `key`), and makes them the declarations once kept.
    pub(super) fn adopt<T: Serialize>(
        &self,
        declared: &mut Declared,
        next: Declared,
        key: &str,
        name: &str,
        decl: &T,
    ) -> Result<(), Refusal> {
        let logged = Logged {
            declaration: decl,
            retired: false,
        };
        self.persist(&next, key, name, Some(&logged))?;
        *declared = next;
        Ok(())
    }

    /// Removes `name`, declared over the API, from the declarations of its kind (`of`) and
    /// keeps the change (`persist`, under `key`). Refused when the config file declares it
    /// (`in_file`) or the API does not; `kind` names the kind in the refusals.
    pub(super) fn retire<T>(
        &self,
        name: &str,
        (kind, key): (&str, &str),
        in_file: bool,
        of: fn(&mut Declared) -> &mut BTreeMap<String, T>,
    ) -> Result<(), Refusal> {
        if in_file {
            return Err(Refusal::Conflict(format!(
                "{kind} '{name}' is declared in the config file; remove it there"
            )));
        }
        let mut declared = crate::lock(&self.declared);
        if !of(&mut declared).contains_key(name) {
            return Err(Refusal::Unknown(format!(
                "no {kind} named '{name}' was declared over the API"
            )));
        }
        let mut next = declared.clone();
        of(&mut next).remove(name);
        self.persist::<()>(&next, key, name, None)?;
        *declared = next;
        Ok(())
    }

    /// Keeps `next`, the API's declarations after one change: the whole set in
    /// `declarations.json`, or the changed declaration's record in the state topic (`value`
    /// None: a tombstone).
    pub(super) fn persist<T: Serialize>(
        &self,
        next: &Declared,
        kind: &str,
        name: &str,
        value: Option<&T>,
    ) -> Result<(), Refusal> {
        match &self.keep {
            Keep::File(dir) => save(dir, next).map_err(|e| {
                Refusal::Failed(format!(
                    "the declaration was not made: {e:#} (state.dir must stay writable)"
                ))
            }),
            Keep::Log(log) => {
                let bytes = value
                    .map(serde_json::to_vec)
                    .transpose()
                    .map_err(|e| Refusal::Failed(format!("cannot encode the declaration: {e}")))?;
                let key = crate::store::kafka::declared::key(kind, name);
                log.write(&key, bytes.as_deref()).map_err(|e| {
                    Refusal::Failed(format!(
                        "the declaration was not made: {e:#} (the state topic {} keeps the \
                         declarations: it must take writes; try again)",
                        log.topic()
                    ))
                })
            }
            Keep::Nowhere => Err(Refusal::Failed(
                "no state.dir to keep the declaration in".to_string(),
            )),
        }
    }
}
