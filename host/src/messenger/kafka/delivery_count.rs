//! How many times a record was delivered and never finished, kept in the
//! commit metadata of its offset (poison pills: see `kafka.max_deliveries`).

/// The commit metadata that counts deliveries of the record at its offset.
const DELIVERIES: &str = "weir.deliveries=";

/// The deliveries of a record that never finished, as its commit metadata
/// keeps them: `weir.deliveries=3`, `weir.deliveries=3;alone` (the last
/// was processed alone in its process), `...;died-alone` (an earlier one
/// was, and its process died).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Delivery {
    pub(super) count: u32,
    pub(super) alone: bool,
    pub(super) died_alone: bool,
}

impl Delivery {
    pub(super) fn parse(metadata: &str) -> Option<Self> {
        let mut parts = metadata.strip_prefix(DELIVERIES)?.split(';');
        let count = parts.next()?.parse().ok()?;
        let flags: Vec<&str> = parts.collect();
        Some(Self {
            count,
            alone: flags.contains(&"alone"),
            died_alone: flags.contains(&"died-alone"),
        })
    }

    pub(super) fn metadata(&self) -> String {
        let mut text = format!("{DELIVERIES}{}", self.count);
        if self.alone {
            text.push_str(";alone");
        }
        if self.died_alone {
            text.push_str(";died-alone");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::Delivery;

    #[test]
    fn delivery_counts_round_trip_through_commit_metadata() {
        for d in [
            Delivery {
                count: 1,
                alone: false,
                died_alone: false,
            },
            Delivery {
                count: 3,
                alone: true,
                died_alone: false,
            },
            Delivery {
                count: 4,
                alone: true,
                died_alone: true,
            },
        ] {
            assert_eq!(Delivery::parse(&d.metadata()), Some(d));
        }
        // Counts written before the flags existed still read.
        assert_eq!(
            Delivery::parse("weir.deliveries=2").map(|d| d.count),
            Some(2)
        );
        assert_eq!(Delivery::parse("something else"), None);
    }
}
