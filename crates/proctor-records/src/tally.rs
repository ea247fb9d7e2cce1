//! How many trials ended in each outcome, keyed by the outcome itself: the counts `proctor
//! list`, `status`, `show`, the run's progress and the viewer print, from their producer (the
//! index, the engine's committer, the run's trials) to their renderer without becoming labels.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::OutcomeKind;

/// How many trials ended in each of the eight outcomes. Only the outcomes that occurred are
/// listed, in the order of their labels ([`OutcomeTally::BY_LABEL`]: `abandoned`, `asked`,
/// `completed`, ...), and it is written as a JSON object from label to count: the same text, key
/// for key and in the same order, as the map of labels it replaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeTally {
    /// The count of each outcome, at its place in [`OutcomeKind::ALL`].
    counts: [u64; 8],
}

impl OutcomeTally {
    /// The eight outcomes in the order of their labels, the order a tally is listed and written
    /// in (a map of labels was sorted so).
    pub const BY_LABEL: [OutcomeKind; 8] = [
        OutcomeKind::Abandoned,
        OutcomeKind::Asked,
        OutcomeKind::Completed,
        OutcomeKind::Errored,
        OutcomeKind::RefusedHonestly,
        OutcomeKind::RefusedWrongly,
        OutcomeKind::Ungradeable,
        OutcomeKind::Wrong,
    ];

    /// Counts `n` more trials that ended in `kind`.
    pub fn add(&mut self, kind: OutcomeKind, n: u64) {
        self.counts[kind as usize] += n;
    }

    /// How many trials ended in `kind`.
    pub fn get(&self, kind: OutcomeKind) -> u64 {
        self.counts[kind as usize]
    }

    /// Every trial counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The outcomes that occurred with their counts, in the order of their labels.
    pub fn iter(&self) -> impl Iterator<Item = (OutcomeKind, u64)> + '_ {
        OutcomeTally::BY_LABEL
            .into_iter()
            .map(|kind| (kind, self.get(kind)))
            .filter(|&(_, n)| n > 0)
    }
}

impl FromIterator<OutcomeKind> for OutcomeTally {
    /// One trial of each outcome given.
    fn from_iter<I: IntoIterator<Item = OutcomeKind>>(kinds: I) -> OutcomeTally {
        let mut tally = OutcomeTally::default();
        for kind in kinds {
            tally.add(kind, 1);
        }
        tally
    }
}

impl FromIterator<(OutcomeKind, u64)> for OutcomeTally {
    /// The counts given, added up by outcome.
    fn from_iter<I: IntoIterator<Item = (OutcomeKind, u64)>>(counts: I) -> OutcomeTally {
        let mut tally = OutcomeTally::default();
        for (kind, n) in counts {
            tally.add(kind, n);
        }
        tally
    }
}

impl Serialize for OutcomeTally {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.iter().count()))?;
        for (kind, n) in self.iter() {
            map.serialize_entry(kind.label(), &n)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn by_label_is_every_outcome_sorted_by_its_label() {
        let mut sorted = OutcomeKind::ALL;
        sorted.sort_by_key(|k| k.label());
        assert_eq!(OutcomeTally::BY_LABEL, sorted);
    }

    #[test]
    fn a_tally_lists_and_writes_what_the_map_of_labels_did() {
        let kinds = [
            OutcomeKind::Wrong,
            OutcomeKind::Completed,
            OutcomeKind::Errored,
            OutcomeKind::Wrong,
            OutcomeKind::Ungradeable,
            OutcomeKind::Abandoned,
        ];
        let tally: OutcomeTally = kinds.into_iter().collect();
        let mut by_label: BTreeMap<String, u64> = BTreeMap::new();
        for k in kinds {
            *by_label.entry(k.label().to_string()).or_default() += 1;
        }
        let listed: Vec<(String, u64)> = tally.iter().map(|(k, n)| (k.to_string(), n)).collect();
        let before: Vec<(String, u64)> = by_label.clone().into_iter().collect();
        assert_eq!(listed, before);
        assert_eq!(
            serde_json::to_string(&tally).unwrap(),
            serde_json::to_string(&by_label).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&tally).unwrap(),
            r#"{"abandoned":1,"completed":1,"errored":1,"ungradeable":1,"wrong":2}"#
        );
        assert_eq!(tally.get(OutcomeKind::Wrong), 2);
        assert_eq!(tally.get(OutcomeKind::Asked), 0);
        assert_eq!(tally.total(), 6);
    }

    #[test]
    fn an_empty_tally_lists_nothing_and_writes_an_empty_object() {
        let tally = OutcomeTally::default();
        assert_eq!(tally.iter().count(), 0);
        assert_eq!(serde_json::to_string(&tally).unwrap(), "{}");
        let counted: OutcomeTally = [(OutcomeKind::Asked, 0), (OutcomeKind::Asked, 3)]
            .into_iter()
            .collect();
        assert_eq!(
            counted.iter().collect::<Vec<_>>(),
            [(OutcomeKind::Asked, 3)]
        );
    }
}
