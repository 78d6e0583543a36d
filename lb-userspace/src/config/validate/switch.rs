//! The `[switch]` table.

use std::collections::HashMap;

use lb_common::limits::FLOWLET_TABLE_DEFAULT;

use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::RawSwitch;
use crate::config::schema::{
    FLOWLET_TABLE_MAX, FLOWLET_TABLE_MIN, MAX_INGRESS_INTERFACES, Switch, XdpModeSetting,
};

impl Ctx<'_> {
    pub(super) fn switch(&self, raw: RawSwitch) -> Result<Switch, ConfigError> {
        let list = self.non_empty(
            raw.interfaces,
            format_args!("switch.interfaces is empty; list at least one interface to attach to"),
        )?;
        self.at_most(
            &list,
            MAX_INGRESS_INTERFACES,
            format_args!(
                "too many interfaces in switch.interfaces: at most {MAX_INGRESS_INTERFACES} \
                 are allowed"
            ),
        )?;
        let mut seen = HashMap::new();
        let mut interfaces = Vec::with_capacity(list.len());
        for name in list {
            let span = name.span();
            let name = self.ifname(name)?;
            self.unique(
                &mut seen,
                name.clone(),
                span,
                format_args!("interface {name:?} in switch.interfaces"),
            )?;
            interfaces.push(name);
        }

        let xdp_mode = self.lookup_or_default(
            raw.xdp_mode,
            &XdpModeSetting::NAMES,
            "unknown xdp_mode",
            "valid modes",
        )?;

        let flowlet_table_size = raw
            .flowlet_table_size
            .map_or(Ok(FLOWLET_TABLE_DEFAULT), |n| {
                self.in_range(
                    &n,
                    FLOWLET_TABLE_MIN..=FLOWLET_TABLE_MAX,
                    "switch.flowlet_table_size",
                    "",
                )
            })?;

        let dlb_mac = raw
            .dlb_mac
            .map(|mac| self.mac(&mac, "switch.dlb_mac"))
            .transpose()?;

        Ok(Switch {
            hash_seed: raw.hash_seed,
            interfaces,
            xdp_mode,
            flowlet_table_size,
            dlb_mac,
        })
    }
}
