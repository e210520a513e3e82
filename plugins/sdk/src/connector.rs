//! Connectors: the [`Connector`] trait a plugin that reads a source
//! implements, and [`export_connector!`](crate::export_connector), which
//! exports it through the `syncing-connector` world.

use serde::de::DeserializeOwned;

use crate::{ConfigIssue, PluginError, Publisher};

/// A connector: reads a source and publishes documents.
pub trait Connector: Sized + 'static {
    type Config: DeserializeOwned;
    fn check(_config: &Self::Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
    fn pre_execute(config: Self::Config, run_id: &str) -> Result<Self, PluginError>;
    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError>;
    fn post_execute(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), PluginError> {
        Ok(())
    }
}
/// Export a [`Connector`] implementation as the component's connector.
#[macro_export]
macro_rules! export_connector {
    ($ty:ty) => {
        ::std::thread_local! {
            static __WEIR_CONNECTOR: ::std::cell::RefCell<Option<$ty>> = const { ::std::cell::RefCell::new(None) };
        }
        #[doc(hidden)]
        pub struct __WeirConnector;
        impl __WeirConnector {
            fn with(
                f: impl FnOnce(&mut $ty) -> Result<(), $crate::PluginError>,
            ) -> Result<(), $crate::PluginError> {
                __WEIR_CONNECTOR.with(|s| match s.borrow_mut().as_mut() {
                    Some(connector) => f(connector),
                    None => Err($crate::__not_started()),
                })
            }
        }
        impl $crate::bindings::connector::exports::weir::plugin::connector_api::Guest for __WeirConnector {
            fn check_config(config: String) -> Vec<$crate::ConfigIssue> {
                $crate::check_config::<<$ty as $crate::Connector>::Config>(&config, <$ty as $crate::Connector>::check)
            }
            fn pre_execute(config: String, run_id: String) -> Result<(), $crate::PluginError> {
                let config = $crate::__checked_config(&config, <$ty as $crate::Connector>::check)?;
                let connector = <$ty as $crate::Connector>::pre_execute(config, &run_id)?;
                __WEIR_CONNECTOR.with(|s| *s.borrow_mut() = Some(connector));
                Ok(())
            }
            fn execute(publisher: &$crate::Publisher) -> Result<(), $crate::PluginError> {
                Self::with(|c| $crate::Connector::execute(c, publisher))
            }
            fn post_execute() -> Result<(), $crate::PluginError> {
                Self::with($crate::Connector::post_execute)
            }
            fn close() -> Result<(), $crate::PluginError> {
                __WEIR_CONNECTOR.with(|s| match s.borrow_mut().take() {
                    Some(mut connector) => $crate::Connector::close(&mut connector),
                    None => Ok(()),
                })
            }
        }
        $crate::bindings::connector::__export_connector_world!(__WeirConnector with_types_in $crate::bindings::connector);
    };
}
