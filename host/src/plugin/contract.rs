//! Which versions of the plugin contract (`weir:plugin`, the WIT in `wit/`)
//! this host runs, and the check that refuses a component built for another.
//!
//! The rule (also in the plugin author's guide): from 0.2.0 on, a released
//! interface never changes. New functions come only in new interfaces or new
//! worlds, published as a later 0.2.x; the host finds which ones a plugin
//! uses from the names of its imports and exports, and keeps running
//! plugins built for every 0.2.x it lists in [`SUPPORTED`]. A component that
//! names any other version is refused before it runs, with a message naming
//! the versions this host supports.

use wasmtime::Engine;
use wasmtime::component::Component;

/// The package every contract interface belongs to.
const PACKAGE: &str = "weir:plugin";

/// Contract versions this host runs, oldest first.
pub const SUPPORTED: &[&str] = &["0.2.0", "0.2.1", "0.2.2", "0.2.3", "0.2.4", "0.2.5"];

/// Why a component is refused before it runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// It names a contract version this host does not run.
    #[error(
        "it is built for contract {PACKAGE}@{version} (it uses `{name}`), which this Weir does not run; \
         it runs {supported}: rebuild the plugin against one of them (see the plugin author's guide)"
    )]
    Version {
        version: String,
        name: String,
        supported: String,
    },
    /// It exports no contract interface at all.
    #[error(
        "it exports no {PACKAGE} interface, so it is not a Weir plugin (a {kind} exports `{PACKAGE}/{api}`); \
         exports: [{exports}]"
    )]
    NotAPlugin {
        kind: String,
        api: String,
        exports: String,
    },
    /// It exports the interface of another kind.
    #[error(
        "it exports `{PACKAGE}/{found}`, not `{PACKAGE}/{api}`: it is not a {kind} (check the plugin's kind in the config)"
    )]
    WrongKind {
        found: String,
        kind: String,
        api: String,
    },
}

/// Check that `component` is built for a supported contract version and
/// exports `api` (`weir:plugin/<api>`), the interface of plugin kind `kind`.
pub(crate) fn check(
    component: &Component,
    engine: &Engine,
    kind: &str,
    api: &str,
) -> Result<(), ContractError> {
    let ty = component.component_type();
    let imports = ty.imports(engine).map(|(name, _)| name.to_owned());
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    for name in imports.chain(exports.iter().cloned()) {
        let Some(version) = contract_version(&name) else {
            continue;
        };
        if !SUPPORTED.contains(&version) {
            return Err(ContractError::Version {
                version: version.to_owned(),
                name,
                supported: supported_list(),
            });
        }
    }
    if exports
        .iter()
        .any(|n| contract_name(n).is_some_and(|rest| rest.split('@').next() == Some(api)))
    {
        return Ok(());
    }
    let found: Vec<&str> = exports
        .iter()
        .filter_map(|n| contract_name(n))
        .filter_map(|rest| rest.split('@').next())
        .collect();
    Err(match found.as_slice() {
        [] => ContractError::NotAPlugin {
            kind: kind.to_owned(),
            api: api.to_owned(),
            exports: exports.join(", "),
        },
        found => ContractError::WrongKind {
            found: found.join("`, `"),
            kind: kind.to_owned(),
            api: api.to_owned(),
        },
    })
}

/// Whether `component` exports the contract interface `api`
/// (`weir:plugin/<api>`, of any version).
pub(crate) fn exports(component: &Component, engine: &Engine, api: &str) -> bool {
    component
        .component_type()
        .exports(engine)
        .filter_map(|(name, _)| contract_name(name))
        .any(|rest| rest.split('@').next() == Some(api))
}

/// Whether `component` imports the contract interface `api`
/// (`weir:plugin/<api>`, of any version).
pub(crate) fn imports(component: &Component, engine: &Engine, api: &str) -> bool {
    component
        .component_type()
        .imports(engine)
        .filter_map(|(name, _)| contract_name(name))
        .any(|rest| rest.split('@').next() == Some(api))
}

/// The plugin kinds, by the contract interface each exports.
const KINDS: [(&str, &str); 4] = [
    ("stage", "stage-batch-api"),
    ("stage", "stage-api"),
    ("connector", "connector-api"),
    ("indexer", "indexer-api"),
];

/// Which plugin kind `component` is, from the contract interface it exports.
pub(crate) fn kind_of(component: &Component, engine: &Engine) -> Option<&'static str> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    KINDS.iter().find_map(|(kind, api)| {
        exports
            .iter()
            .filter_map(|n| contract_name(n))
            .any(|rest| rest.split('@').next() == Some(*api))
            .then_some(*kind)
    })
}

/// `stage-api@0.2.0` for `weir:plugin/stage-api@0.2.0`; none for other names.
fn contract_name(name: &str) -> Option<&str> {
    name.strip_prefix(PACKAGE)?.strip_prefix('/')
}

/// The contract version in an import or export name such as
/// `weir:plugin/stage-api@0.2.0`, if the name is the contract's.
fn contract_version(name: &str) -> Option<&str> {
    Some(
        contract_name(name)?
            .split_once('@')
            .map_or("unversioned", |(_, v)| v),
    )
}

/// The supported versions for messages: `weir:plugin@0.2.0`.
pub fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|v| format!("{PACKAGE}@{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::{ContractError, contract_version};

    #[test]
    fn refusals_read_as_before() {
        let version = ContractError::Version {
            version: "0.1.0".into(),
            name: "weir:plugin/log@0.1.0".into(),
            supported: "weir:plugin@0.2.0".into(),
        };
        assert_eq!(
            version.to_string(),
            "it is built for contract weir:plugin@0.1.0 (it uses `weir:plugin/log@0.1.0`), which this Weir \
             does not run; it runs weir:plugin@0.2.0: rebuild the plugin against one of them (see the plugin \
             author's guide)"
        );
        let none = ContractError::NotAPlugin {
            kind: "stage".into(),
            api: "stage-api".into(),
            exports: "a, b".into(),
        };
        assert_eq!(
            none.to_string(),
            "it exports no weir:plugin interface, so it is not a Weir plugin (a stage exports \
             `weir:plugin/stage-api`); exports: [a, b]"
        );
        let wrong = ContractError::WrongKind {
            found: "indexer-api".into(),
            kind: "stage".into(),
            api: "stage-api".into(),
        };
        assert_eq!(
            wrong.to_string(),
            "it exports `weir:plugin/indexer-api`, not `weir:plugin/stage-api`: it is not a stage (check \
             the plugin's kind in the config)"
        );
    }

    #[test]
    fn versions_are_read_from_contract_names_only() {
        assert_eq!(
            contract_version("weir:plugin/stage-api@0.2.0"),
            Some("0.2.0")
        );
        assert_eq!(contract_version("weir:plugin/log@0.1.0"), Some("0.1.0"));
        assert_eq!(contract_version("weir:plugin/log"), Some("unversioned"));
        assert_eq!(contract_version("wasi:io/streams@0.2.6"), None);
        assert_eq!(contract_version("weir:plugins/x@1.0.0"), None);
    }
}
