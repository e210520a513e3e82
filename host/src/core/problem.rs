//! The one shape of a reported problem: where it is and what is wrong.
//!
//! Config checks, shape errors, plugin config issues and admission refusals
//! all report [`Problem`]s, gathered in [`Problems`] so that a run stops
//! before it starts listing every problem at once.

use std::fmt;

/// One problem, at a location such as `pipelines.books.stages.trim.plugin.path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where: a dotted path such as `pipelines.books.stages.trim.config.fields`
    /// (empty when the problem is the whole input's).
    pub location: String,
    pub message: String,
}

impl Problem {
    /// A problem at `location`.
    pub fn new(location: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            message: message.into(),
        }
    }

    /// A problem of the whole input, at no location.
    pub fn whole(message: impl Into<String>) -> Self {
        Self::new("", message)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.location, self.message)
        }
    }
}

/// Every problem found, in the order found.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    /// Just `problem`.
    pub fn one(problem: Problem) -> Self {
        Self(vec![problem])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn push(&mut self, problem: Problem) {
        self.0.push(problem);
    }

    /// Add a problem at `location`.
    pub fn at(&mut self, location: impl Into<String>, message: impl Into<String>) {
        self.push(Problem::new(location, message));
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Problem> {
        self.0.iter()
    }

    /// `Ok(value)` when there are no problems, else these.
    pub fn or_ok<T>(self, value: T) -> Result<T, Self> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "{n} configuration error{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            writeln!(f, "  - {e}")?;
        }
        Ok(())
    }
}

impl From<Vec<Problem>> for Problems {
    fn from(problems: Vec<Problem>) -> Self {
        Self(problems)
    }
}

impl FromIterator<Problem> for Problems {
    fn from_iter<I: IntoIterator<Item = Problem>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl Extend<Problem> for Problems {
    fn extend<I: IntoIterator<Item = Problem>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl IntoIterator for Problems {
    type Item = Problem;
    type IntoIter = std::vec::IntoIter<Problem>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Problems {
    type Item = &'a Problem;
    type IntoIter = std::slice::Iter<'a, Problem>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_print_as_a_numbered_list() {
        let one = Problems::one(Problem::new("worker.threads", "must be at least 1"));
        assert_eq!(
            one.to_string(),
            "1 configuration error:\n  - worker.threads: must be at least 1\n"
        );
        let two: Problems = [Problem::whole("bad toml"), Problem::new("a", "b")]
            .into_iter()
            .collect();
        assert_eq!(
            two.to_string(),
            "2 configuration errors:\n  - bad toml\n  - a: b\n"
        );
    }
}
