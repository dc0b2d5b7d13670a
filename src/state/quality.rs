//! Each stream's live prequential quality (`quality = { ... }`; docs/streams.md "Quality"): ingest
//! predicts every row with the stream's quality model before folding it
//! (`ravel_core::prequential::TestThenTrain`, the definition `ravel fit --prequential` uses)
//! and records the prediction here; the API, `/metrics` and the history read the figures.
//!
//! One `Quality` per part of the stream (the `dir` store's one part, or each partition this
//! replica owns with the `kafka` store), each behind its own lock: ingest takes it once per
//! folded piece to record the rows, a reader to add its window to the sums (`Combiner`). A
//! stream's figures are its parts' combined (`Quality::combined`). The figures live in memory
//! only: a restart starts them empty, and the first rows after it are predicted by a model of
//! the restored statistics (extracted at once, then at the schedule's points: the warm-up at
//! p + 1, 2 (p + 1), ... below `every_rows`, then every multiple of it). Rows before a part's
//! first model are counted apart (`unscored_rows`), and the summary says in words when the
//! model is absent or stale (`model_status`, `model_note`), as the console shows it.

use crate::config::quality::QualitySettings;
use ravel_core::prequential::{Combiner, Quality, Report, TestThenTrain};
use ravel_core::solve::Request;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use utoipa::ToSchema;

/// What one part shares with readers.
#[derive(Debug)]
pub struct Shared {
    pub quality: Quality,
    /// Rows of the statistics the current quality model was extracted from.
    pub model_rows: Option<u64>,
    /// Extractions of the quality model, and those that failed.
    pub extractions: u64,
    pub failures: u64,
    /// Why the last extraction failed (None when it did not).
    pub last_failure: Option<String>,
    /// Rows of the statistics at the next extraction.
    pub next_extraction: u64,
}

/// Ingest's side of one part: the schedule and the shared figures.
pub struct PartQuality {
    pub ttt: TestThenTrain,
    pub shared: Arc<Mutex<Shared>>,
    /// The predictions of the piece being folded.
    pub scores: Vec<f64>,
}

impl PartQuality {
    /// Records the rows just folded (`y`, predicted as `self.scores`).
    pub fn record(&mut self, y: &[f64]) {
        let mut s = crate::lock(&self.shared);
        s.quality.observe(&self.scores, y);
        s.model_rows = self.ttt.model().map(|m| m.n);
        (s.extractions, s.failures) = self.ttt.extractions();
        s.last_failure = self.ttt.last_failure().map(str::to_string);
        s.next_extraction = self.ttt.next_extraction();
        self.scores.clear();
    }
}

/// A stream's quality: its settings and its parts' figures.
#[derive(Debug)]
pub struct LiveQuality {
    pub settings: QualitySettings,
    parts: Mutex<BTreeMap<i32, Arc<Mutex<Shared>>>>,
}

/// The quality of a stream as the API reports it (`quality` of `GET /v1/streams/{name}` and
/// of each stream `GET /v1/streams` lists).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct QualitySummary {
    /// The model is re-extracted at every multiple of this many rows (after the warm-up at
    /// p + 1, 2 (p + 1), 4 (p + 1), ... rows below it).
    pub every_rows: u64,
    /// Rows of the window figures.
    pub window_rows: usize,
    /// The weighted figures weigh a row a rows old by (1 - 1 / decay_rows)^a.
    pub decay_rows: f64,
    /// The quality model (the body of `POST .../model`).
    #[schema(value_type = Object)]
    pub model: Request,
    /// Rows observed since the service started (predicted, and `unscored_rows`).
    pub rows: u64,
    /// Of those, the rows that came before the first quality model: not predicted, in no
    /// figure.
    pub unscored_rows: u64,
    /// `current`: rows are predicted by the model of the last extraction; `none_yet`: no
    /// model yet (the figures wait for it); `stale`: the last extraction failed, an older
    /// model (or none) predicts.
    pub model_status: String,
    /// What `model_status` means for this stream now, in words (null when current).
    pub model_note: Option<String>,
    /// Rows of the statistics at the next extraction (the smallest over the parts).
    pub next_extraction_rows: Option<u64>,
    /// Rows of the statistics the current quality model was extracted from (the largest
    /// over the partitions this replica folds).
    pub model_rows: Option<u64>,
    /// Extractions of the quality model since the start.
    pub extractions: u64,
    /// Those that failed (too few rows, one class): the previous model went on predicting.
    pub failed_extractions: u64,
    /// How full the window is: its rows over `window_rows` per part (1: full; the alert on
    /// the floors waits for it).
    pub window_fill: f64,
    /// Floors of the window's figures (`quality.floor`).
    pub floor: BTreeMap<String, f64>,
    /// The figures: the last `window_rows` rows, exponentially weighted, and in total.
    pub figures: Report,
}

impl LiveQuality {
    pub fn new(settings: QualitySettings) -> LiveQuality {
        LiveQuality {
            settings,
            parts: Mutex::new(BTreeMap::new()),
        }
    }

    /// A fresh tracker of part `key` (a partition, or `ingest::fold::ALL`), replacing its
    /// previous figures.
    pub fn start_part(&self, key: i32, p: usize) -> Option<PartQuality> {
        let ttt = match TestThenTrain::new(&self.settings.model, p, self.settings.every_rows) {
            Ok(t) => t,
            Err(e) => {
                // Checked at start (`config::quality::of_stream`); in depth, no quality.
                tracing::error!(error = %e, "the quality model is refused: no quality figures");
                return None;
            }
        };
        let shared = Arc::new(Mutex::new(Shared {
            quality: Quality::new(self.settings.spec),
            model_rows: None,
            extractions: 0,
            failures: 0,
            last_failure: None,
            next_extraction: 0,
        }));
        self.lock().insert(key, shared.clone());
        Some(PartQuality {
            ttt,
            shared,
            scores: Vec::new(),
        })
    }

    /// A part gone (a partition revoked): its figures go with it.
    pub fn end_part(&self, key: i32) {
        self.lock().remove(&key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<i32, Arc<Mutex<Shared>>>> {
        crate::lock(&self.parts)
    }

    /// The figures now (each part's added to the sums under its lock).
    pub fn summary(&self) -> QualitySummary {
        let parts: Vec<Arc<Mutex<Shared>>> = self.lock().values().cloned().collect();
        let (mut model_rows, mut ext, mut failed, mut rows) = (None, 0, 0, 0);
        let (mut failure, mut next, mut without) = (None::<String>, None::<u64>, 0usize);
        // Each part added under its own lock, nothing copied (`Combiner`): dashboards and the
        // benchmarks poll this.
        let mut combined = Combiner::default();
        for p in &parts {
            let s = crate::lock(p);
            combined.add(&s.quality);
            rows += s.quality.rows();
            model_rows = model_rows.max(s.model_rows);
            ext += s.extractions;
            failed += s.failures;
            failure = failure.or_else(|| s.last_failure.clone());
            next = Some(next.map_or(s.next_extraction, |n| n.min(s.next_extraction)));
            without += usize::from(s.model_rows.is_none());
        }
        let s = &self.settings;
        let figures = combined.report();
        let capacity = (s.spec.window * parts.len().max(1)) as f64;
        let (status, note) = match (&failure, parts.is_empty() || without == parts.len()) {
            (Some(why), _) => (
                "stale",
                Some(format!(
                    "stale: the last extraction of the quality model failed ({why}); {} until \
                     the next extraction{}",
                    if without == parts.len() {
                        "no row is predicted".to_string()
                    } else {
                        "rows are predicted by the previous model".to_string()
                    },
                    next.map_or(String::new(), |n| format!(" at {n} rows"))
                )),
            ),
            (None, true) => (
                "none_yet",
                Some(match next {
                    Some(n) => format!(
                        "no quality model yet: the first is extracted when the statistics hold \
                         {n} rows; rows before it are counted apart (unscored_rows) and are in \
                         no figure"
                    ),
                    None => "no quality model yet: no row has arrived".to_string(),
                }),
            ),
            (None, false) => ("current", None),
        };
        QualitySummary {
            unscored_rows: figures.unscored,
            model_status: status.to_string(),
            model_note: note,
            next_extraction_rows: next,
            window_fill: figures.window.rows / capacity,
            every_rows: s.every_rows,
            window_rows: s.spec.window,
            decay_rows: s.spec.decay_rows,
            model: s.model.clone(),
            rows,
            model_rows,
            extractions: ext,
            failed_extractions: failed,
            floor: s.floor.clone(),
            figures,
        }
    }
}
