//! Prometheus text from several processes as one: `weir serve` shows the
//! series of runs that ran in processes of their own beside its own. The
//! same series from two sources (two runs of one pipeline) is summed, as
//! one process's registry would have counted both: counters, gauges and
//! histogram buckets add up; a summary's quantiles are the last one read.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Series by metric family, summed across the texts added.
#[derive(Debug, Default)]
pub struct Merged {
    families: BTreeMap<String, Family>,
}

#[derive(Debug, Default)]
struct Family {
    help: Option<String>,
    kind: Option<String>,
    /// `name{labels}` to its value and when it last changed.
    series: BTreeMap<String, (f64, Instant)>,
}

/// What to take of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    Everything,
    /// Counters and histograms only: the totals a finished process leaves
    /// (its gauges said what was going on in it, and nothing is).
    Totals,
}

impl Merged {
    /// Add the series of Prometheus `text` to these, as `take` says.
    pub fn add(&mut self, text: &str, take: Take) {
        let now = Instant::now();
        let mut current: Option<String> = None;
        for line in text.lines() {
            if let Some(comment) = line.strip_prefix("# ") {
                let mut words = comment.splitn(3, ' ');
                let (what, name, rest) = (words.next(), words.next(), words.next());
                let (Some(what), Some(name)) = (what, name) else {
                    continue;
                };
                let family = self.families.entry(name.to_owned()).or_default();
                match what {
                    "HELP" => family.help = rest.map(str::to_owned),
                    "TYPE" => family.kind = rest.map(str::to_owned),
                    _ => {}
                }
                current = Some(name.to_owned());
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let name = series.split('{').next().unwrap_or(series);
            let family_name = match &current {
                Some(family) if name.starts_with(family.as_str()) => family.clone(),
                _ => name.to_owned(),
            };
            let family = self.families.entry(family_name).or_default();
            let kind = family.kind.as_deref().unwrap_or("untyped");
            if take == Take::Totals && !matches!(kind, "counter" | "histogram") {
                continue;
            }
            let replace = kind == "summary" && series.contains("quantile=");
            let entry = family.series.entry(series.to_owned()).or_insert((0.0, now));
            entry.0 = if replace { value } else { entry.0 + value };
            entry.1 = now;
        }
    }

    /// Forget series that have not changed for `idle`.
    pub fn expire(&mut self, idle: Duration) {
        for family in self.families.values_mut() {
            family.series.retain(|_, (_, at)| at.elapsed() < idle);
        }
        self.families.retain(|_, f| !f.series.is_empty());
    }

    /// These and `other`'s series together.
    pub fn with(&self, other: &Merged) -> Merged {
        let mut out = Merged::default();
        for source in [self, other] {
            for (name, family) in &source.families {
                let into = out.families.entry(name.clone()).or_default();
                into.help = into.help.take().or_else(|| family.help.clone());
                into.kind = into.kind.take().or_else(|| family.kind.clone());
                for (series, (value, at)) in &family.series {
                    let entry = into.series.entry(series.clone()).or_insert((0.0, *at));
                    entry.0 += value;
                }
            }
        }
        out
    }

    /// As Prometheus text: each family once, with its help and type.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, family) in self.families.iter().filter(|(_, f)| !f.series.is_empty()) {
            if let Some(help) = &family.help {
                out.push_str(&format!("# HELP {name} {help}\n"));
            }
            if let Some(kind) = &family.kind {
                out.push_str(&format!("# TYPE {name} {kind}\n"));
            }
            for (series, (value, _)) in &family.series {
                out.push_str(&format!("{series} {value}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN_ONE: &str = "\
# HELP weir_docs_published_total Documents published
# TYPE weir_docs_published_total counter
weir_docs_published_total{pipeline=\"a b\",tenant=\"acme\"} 5
# TYPE weir_docs_pending gauge
weir_docs_pending{tenant=\"acme\"} 3
# TYPE weir_call_seconds histogram
weir_call_seconds_bucket{le=\"0.1\"} 2
weir_call_seconds_sum 0.5
weir_call_seconds_count 2
";
    const RUN_TWO: &str = "\
# HELP weir_docs_published_total Documents published
# TYPE weir_docs_published_total counter
weir_docs_published_total{pipeline=\"a b\",tenant=\"acme\"} 7
weir_docs_published_total{pipeline=\"z\",tenant=\"zeta\"} 1
# TYPE weir_docs_pending gauge
weir_docs_pending{tenant=\"acme\"} 4
";

    #[test]
    fn the_same_series_from_two_processes_is_summed_and_each_family_written_once() {
        let mut merged = Merged::default();
        merged.add(RUN_ONE, Take::Everything);
        merged.add(RUN_TWO, Take::Everything);
        let text = merged.render();
        assert_eq!(text.matches("# TYPE weir_docs_published_total").count(), 1);
        assert!(text.contains("weir_docs_published_total{pipeline=\"a b\",tenant=\"acme\"} 12\n"));
        assert!(text.contains("weir_docs_published_total{pipeline=\"z\",tenant=\"zeta\"} 1\n"));
        assert!(text.contains("weir_docs_pending{tenant=\"acme\"} 7\n"));
        assert!(text.contains("# TYPE weir_call_seconds histogram\nweir_call_seconds_bucket"));
        assert!(text.contains("weir_call_seconds_count 2\n"));
    }

    #[test]
    fn a_finished_process_leaves_its_totals_not_its_gauges_and_they_expire() {
        let mut finished = Merged::default();
        finished.add(RUN_ONE, Take::Totals);
        let text = finished.render();
        assert!(text.contains("weir_docs_published_total{pipeline=\"a b\",tenant=\"acme\"} 5"));
        assert!(!text.contains("weir_docs_pending"), "{text}");
        let mut live = Merged::default();
        live.add(RUN_TWO, Take::Everything);
        let both = finished.with(&live).render();
        assert!(both.contains("weir_docs_published_total{pipeline=\"a b\",tenant=\"acme\"} 12"));
        finished.expire(Duration::ZERO);
        assert_eq!(finished.render(), "");
    }
}
