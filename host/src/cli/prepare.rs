//! Loading a config into a runner for a command, every problem found on
//! the way reported at once (`config::report`), and the exit code of a
//! command that stopped before it ran.

use std::path::Path;

use weir::config::{Config, Problems};
use weir::run::{RunStatus, Runner};
use weir::topology::{self, Mode, SetupError};

use super::EXIT_INVALID_CONFIG;

/// Why a command ended before it ran: an invalid config (already reported,
/// exit 2) or an error.
pub(super) enum Stopped {
    Invalid,
    Error(anyhow::Error),
}

impl From<SetupError> for Stopped {
    fn from(e: SetupError) -> Self {
        Self::Error(anyhow::Error::msg(e.to_string()))
    }
}

/// Load `path` and build its runner in `mode`, reporting invalid configs.
pub(super) fn prepare(path: &Path, mode: Mode) -> Result<Runner, Stopped> {
    prepare_with(path, |config| topology::runner(config, mode))
}

/// Load `path` and build its runner with `build`, reporting invalid configs.
pub(super) fn prepare_with(
    path: &Path,
    build: impl FnOnce(Config) -> Result<Runner, SetupError>,
) -> Result<Runner, Stopped> {
    let (runner, problems) = draft_with(path, build)?;
    if !problems.is_empty() {
        report_invalid(path, &problems);
        return Err(Stopped::Invalid);
    }
    Ok(runner)
}

/// Load `path` as far as it reads and build its runner with `build`: the
/// runner, and the problems found so far, to report with the plugins'
/// (so that one pass lists them all). A config that gives no runner at
/// all is reported here.
pub(super) fn draft_with(
    path: &Path,
    build: impl FnOnce(Config) -> Result<Runner, SetupError>,
) -> Result<(Runner, Problems), Stopped> {
    let (config, mut problems) = Config::load_draft(path).map_err(|errors| {
        report_invalid(path, &errors);
        Stopped::Invalid
    })?;
    match build(config) {
        Ok(runner) => Ok((runner, problems)),
        Err(SetupError::Invalid(more)) => {
            problems.extend(more);
            report_invalid(path, &problems);
            Err(Stopped::Invalid)
        }
        Err(_) if !problems.is_empty() => {
            report_invalid(path, &problems);
            Err(Stopped::Invalid)
        }
        Err(other) => Err(other.into()),
    }
}

/// [`prepare`], then validate the plugins too: every problem of the
/// config, its shape and its plugins', in one report.
pub(super) fn prepare_validated(
    path: &Path,
    mode: Mode,
) -> Result<(Runner, weir::run::LoadedPlugins), Stopped> {
    validated(
        path,
        draft_with(path, |config| topology::runner(config, mode))?,
    )
}

/// The runner of a draft, with its plugins validated; the draft's
/// problems and the plugins' reported together.
pub(super) fn validated(
    path: &Path,
    (runner, mut problems): (Runner, Problems),
) -> Result<(Runner, weir::run::LoadedPlugins), Stopped> {
    match runner.validate() {
        Ok(plugins) if problems.is_empty() => Ok((runner, plugins)),
        Ok(_) => {
            report_invalid(path, &problems);
            Err(Stopped::Invalid)
        }
        Err(more) => {
            for problem in more {
                if !problems.iter().any(|p| *p == problem) {
                    problems.push(problem);
                }
            }
            report_invalid(path, &problems);
            Err(Stopped::Invalid)
        }
    }
}

/// The exit code of a command that stopped before it ran.
pub(super) fn stopped(result: Result<u8, Stopped>) -> anyhow::Result<u8> {
    match result {
        Ok(code) => Ok(code),
        Err(Stopped::Invalid) => Ok(EXIT_INVALID_CONFIG),
        Err(Stopped::Error(e)) => Err(e),
    }
}

/// Report every problem of the config at `path`, each where it was
/// written.
pub(super) fn report_invalid(path: &Path, errors: &Problems) -> u8 {
    let sources = weir::config::Sources::read(path);
    eprint!("{}", weir::config::report(path, &sources, errors));
    EXIT_INVALID_CONFIG
}

/// A local runner for `path` with its plugins validated, or the exit
/// code of a config that is invalid (already reported) or cannot be set up.
pub(super) fn prepare_validated_local(
    path: &Path,
) -> Result<(Runner, weir::run::LoadedPlugins), u8> {
    prepare_validated_in(path, Mode::Local)
}

/// A runner for `path` in `mode` with its plugins validated, or the exit
/// code of a config that is invalid (already reported) or cannot be set up.
pub(super) fn prepare_validated_in(
    path: &Path,
    mode: Mode,
) -> Result<(Runner, weir::run::LoadedPlugins), u8> {
    prepare_validated(path, mode).map_err(|stopped| match stopped {
        Stopped::Invalid => EXIT_INVALID_CONFIG,
        Stopped::Error(e) => {
            eprintln!("error: {e:#}");
            RunStatus::Failure.exit_code()
        }
    })
}
