//! `[ars_profile]`, `[telemetry]`, and a group's `telemetry` with its next
//! hops' telemetry keys.

use std::collections::BTreeMap;
use std::ops::Range;

use lb_common::select::quality::Scale;
use toml::Spanned;

use crate::config::diagnostics::{ConfigError, Ctx};
use crate::config::raw::{RawArsProfile, RawNextHop, RawTelemetry};
use crate::config::schema::{
    ARS_WEIGHT_MAX, ArsProfile, BYTES_PER_SEC_PER_MBIT, Group, GroupTelemetry, NAME_MAX_LEN,
    NextHopSpec, QUALITY_TIME_MAX_US, SAMPLING_INTERVAL_MAX_US, SAMPLING_INTERVAL_MIN_US,
    STALE_AFTER_MAX_MS, STALE_AFTER_MIN_MS, TELEMETRY_TIMEOUT_MAX_MS, TELEMETRY_TIMEOUT_MIN_MS,
    TelemetrySettings, TelemetrySource,
};
use crate::telemetry::template::{
    INTERFACE as TEMPLATE_INTERFACE, IP as TEMPLATE_IP, SWITCH as TEMPLATE_SWITCH, TargetTemplate,
};
use crate::telemetry::{counters_db, remote};

/// What the errors suggest for each source's template.
const REMOTE_EXAMPLE: &str = "http://{switch}:9100/metrics";
const COUNTERS_DB_EXAMPLE: &str = "redis://{switch}:6379";

/// Loads are given in Mbit/s up to 10 Tbit/s; queueing delay in
/// microseconds up to 10 s.
const LOAD_MAX_MBIT: u64 = 10_000_000;
const DELAY_MAX_US: u64 = 10_000_000;

/// A next hop's telemetry keys, taken out before the next hop itself is
/// validated: which of them apply depends on the group's source.
pub(super) struct PathKeys {
    span: Range<usize>,
    url: Option<Spanned<String>>,
    device: Option<Spanned<String>>,
    sonic_port: Option<Spanned<String>>,
    counters_db: Option<Spanned<String>>,
}

impl PathKeys {
    pub(super) fn take(nh: &mut Spanned<RawNextHop>) -> Self {
        let span = nh.span();
        let nh = nh.get_mut();
        Self {
            span,
            url: nh.telemetry_url.take(),
            device: nh.telemetry_device.take(),
            sonic_port: nh.sonic_port.take(),
            counters_db: nh.counters_db.take(),
        }
    }

    /// Whether any of them is set.
    pub(super) fn any(&self) -> bool {
        self.first_key().is_some()
    }
}

/// A group's own `telemetry_url` and `telemetry_device` (`remote`) or
/// `counters_db` and `sonic_port` (`counters-db`): templates for the next
/// hops it learns, when it learns them (from `learns_from`), and the
/// `switch_addresses` their `{switch}` reads.
pub(super) struct Template {
    pub(super) url: Option<Spanned<String>>,
    pub(super) device: Option<Spanned<String>>,
    pub(super) counters_db: Option<Spanned<String>>,
    pub(super) sonic_port: Option<Spanned<String>>,
    pub(super) switches: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    pub(super) learns_from: Option<&'static str>,
}

impl Template {
    fn first_key(&self) -> Option<(Range<usize>, &'static str)> {
        (url_or_device(&self.url, &self.device))
            .or_else(|| port_or_address(&self.sonic_port, &self.counters_db))
            .or_else(|| (self.switches.as_ref()).map(|s| (s.span(), "switch_addresses")))
    }
}

/// Where the first of a `telemetry_url` and a `telemetry_device` is set,
/// and which.
fn url_or_device(
    url: &Option<Spanned<String>>,
    device: &Option<Spanned<String>>,
) -> Option<(Range<usize>, &'static str)> {
    (url.as_ref().map(|u| (u.span(), "telemetry_url")))
        .or_else(|| device.as_ref().map(|d| (d.span(), "telemetry_device")))
}

/// Where the first of a `sonic_port` and a `counters_db` is set, and which.
fn port_or_address(
    port: &Option<Spanned<String>>,
    address: &Option<Spanned<String>>,
) -> Option<(Range<usize>, &'static str)> {
    (port.as_ref().map(|p| (p.span(), "sonic_port")))
        .or_else(|| address.as_ref().map(|a| (a.span(), "counters_db")))
}

impl Ctx<'_> {
    pub(super) fn ars_profile(
        &self,
        raw: Option<Spanned<RawArsProfile>>,
    ) -> Result<ArsProfile, ConfigError> {
        let mut profile = ArsProfile::default();
        let Some(raw) = raw else {
            return Ok(profile);
        };
        let span = raw.span();
        let raw = raw.into_inner();
        if let Some(algorithm) = &raw.algorithm {
            self.lookup(
                algorithm,
                &[("ewma", ())],
                "unsupported ars_profile algorithm",
                "supported",
            )?;
        }
        if let Some(interval) = &raw.sampling_interval {
            profile.sampling_interval_us = self.in_range(
                interval,
                SAMPLING_INTERVAL_MIN_US..=SAMPLING_INTERVAL_MAX_US,
                "ars_profile sampling_interval (microseconds)",
                "",
            )?;
        }
        let q = &mut profile.quality;
        if let Some(tau) = &raw.ewma_time_constant {
            q.smoothing_us = self.in_range(
                tau,
                0..=QUALITY_TIME_MAX_US,
                "ars_profile ewma_time_constant (microseconds)",
                "",
            )?;
        }
        if let Some(hold) = &raw.worst_band_hold {
            q.worst_hold_us = self.in_range(
                hold,
                0..=QUALITY_TIME_MAX_US,
                "ars_profile worst_band_hold (microseconds)",
                "",
            )?;
        }
        q.past_load = self.scale(
            "past_load",
            q.past_load,
            [
                &raw.past_load_min_value,
                &raw.past_load_max_value,
                &raw.past_load_weight,
            ],
            LOAD_MAX_MBIT,
            BYTES_PER_SEC_PER_MBIT,
        )?;
        q.current_load = self.scale(
            "current_load",
            q.current_load,
            [
                &raw.current_load_min_value,
                &raw.current_load_max_value,
                &raw.current_load_weight,
            ],
            LOAD_MAX_MBIT,
            BYTES_PER_SEC_PER_MBIT,
        )?;
        q.future_load = self.scale(
            "future_load",
            q.future_load,
            [
                &raw.future_load_min_value,
                &raw.future_load_max_value,
                &raw.future_load_weight,
            ],
            DELAY_MAX_US,
            1,
        )?;
        if [q.past_load, q.current_load, q.future_load]
            .iter()
            .all(|s| s.weight == 0)
        {
            return Err(self.error(
                span,
                "ars_profile weighs nothing: past_load_weight, current_load_weight and \
                 future_load_weight are all 0, so every path would always look idle",
            ));
        }
        Ok(profile)
    }

    /// One measure's `{name}_min_value`, `_max_value` and `_weight` over
    /// `default`, values in the file's unit (`unit` bytes each).
    fn scale(
        &self,
        name: &str,
        default: Scale,
        [min, max, weight]: [&Option<Spanned<i64>>; 3],
        max_value: u64,
        unit: u64,
    ) -> Result<Scale, ConfigError> {
        let value = |raw: &Option<Spanned<i64>>, key: &str, default: u64| match raw {
            Some(v) => self
                .in_range(v, 0..=max_value, &format!("ars_profile {name}_{key}"), "")
                .map(|v: u64| v * unit),
            None => Ok(default),
        };
        let scale = Scale {
            min: value(min, "min_value", default.min)?,
            max: value(max, "max_value", default.max)?,
            weight: match weight {
                Some(w) => self.in_range(
                    w,
                    0..=ARS_WEIGHT_MAX,
                    &format!("ars_profile {name}_weight"),
                    "",
                )?,
                None if min.is_some() || max.is_some() => 1,
                None => default.weight,
            },
        };
        if scale.weight > 0 && scale.max <= scale.min {
            let at = max.as_ref().or(min.as_ref()).map_or(0..0, Spanned::span);
            return Err(self.error(
                at,
                format!(
                    "ars_profile {name}_max_value must be above {name}_min_value \
                     ({} <= {}, in the file's units)",
                    scale.max / unit,
                    scale.min / unit
                ),
            ));
        }
        Ok(scale)
    }

    pub(super) fn telemetry_settings(
        &self,
        raw: Option<Spanned<RawTelemetry>>,
        profile: &ArsProfile,
    ) -> Result<TelemetrySettings, ConfigError> {
        let mut settings = TelemetrySettings::default();
        let Some(raw) = raw else {
            return Ok(settings);
        };
        let raw = raw.into_inner();
        if let Some(stale) = &raw.stale_after_ms {
            settings.stale_after_ms = self.in_range(
                stale,
                STALE_AFTER_MIN_MS..=STALE_AFTER_MAX_MS,
                "telemetry stale_after_ms",
                "",
            )?;
            if u64::from(settings.stale_after_ms) * 1000 <= u64::from(profile.sampling_interval_us)
            {
                return Err(self.error(
                    stale.span(),
                    format!(
                        "telemetry stale_after_ms {} is not above the sampling interval \
                         ({} us): every path would always be stale",
                        settings.stale_after_ms, profile.sampling_interval_us
                    ),
                ));
            }
        }
        if let Some(timeout) = &raw.timeout_ms {
            settings.timeout_ms = self.in_range(
                timeout,
                TELEMETRY_TIMEOUT_MIN_MS..=TELEMETRY_TIMEOUT_MAX_MS,
                "telemetry timeout_ms",
                "",
            )?;
        }
        if let Some(address) = raw.counters_db {
            settings.counters_db =
                Some(self.counters_db_address(&address, "telemetry counters_db")?);
        }
        Ok(settings)
    }

    /// A COUNTERS_DB address, `key` naming it in the error.
    fn counters_db_address(
        &self,
        address: &Spanned<String>,
        key: &str,
    ) -> Result<counters_db::Address, ConfigError> {
        address.get_ref().parse().map_err(|why| {
            self.error(
                address.span(),
                format!("{key} {:?}: {why}", address.get_ref()),
            )
        })
    }

    /// Warns of each of `tables` (name and span) when no group has a
    /// telemetry source: only a source's readings use them.
    pub(super) fn unread_telemetry_tables(
        &self,
        tables: impl Iterator<Item = (&'static str, Range<usize>)>,
        groups: &[Group],
    ) {
        if groups.iter().any(|g| g.telemetry.is_some()) {
            return;
        }
        for (table, span) in tables {
            self.warn(
                span,
                format!("{table} has no effect: no group has a telemetry source"),
            );
        }
    }

    /// Group `group`'s telemetry from its `telemetry` key, its own
    /// templates and its next hops' keys (`paths`, same order as `specs`).
    pub(super) fn group_telemetry(
        &self,
        group: &str,
        source: Option<Spanned<String>>,
        template: Template,
        paths: Vec<PathKeys>,
        specs: &[NextHopSpec],
        settings: &TelemetrySettings,
    ) -> Result<Option<GroupTelemetry>, ConfigError> {
        if let (Some((span, key)), None) = (template.first_key(), template.learns_from) {
            let instead = if key == "switch_addresses" {
                "write each one's telemetry_url or counters_db with its switch's address".to_owned()
            } else {
                format!("set {key} on each")
            };
            return Err(self.error(
                span,
                format!(
                    "{key} at the group is a template for next hops the group learns \
                     (kernel_routes, sonic_routes); group {group:?} lists its next hops: \
                     {instead}"
                ),
            ));
        }
        let Some(source_key) = source else {
            let stray =
                (template.first_key()).or_else(|| paths.iter().find_map(PathKeys::first_key));
            if let Some((span, key)) = stray {
                return Err(self.error(
                    span,
                    format!("{key} is set but group {group:?} has no `telemetry` source"),
                ));
            }
            return Ok(None);
        };
        let source = self.lookup(
            &source_key,
            &TelemetrySource::NAMES,
            "unknown telemetry source",
            "sources",
        )?;
        for path in &paths {
            let stray = match source {
                TelemetrySource::Linux => path.first_key(),
                TelemetrySource::CountersDb => path.url_or_device(),
                TelemetrySource::Remote => path.counters_keys(),
            };
            if let Some((span, key)) = stray {
                return Err(self.error(
                    span,
                    format!("{key} does not apply to group {group:?}'s telemetry = \"{source}\""),
                ));
            }
        }
        let stray = match source {
            TelemetrySource::Linux => template.first_key(),
            TelemetrySource::CountersDb => url_or_device(&template.url, &template.device),
            TelemetrySource::Remote => port_or_address(&template.sonic_port, &template.counters_db),
        };
        if let Some((span, key)) = stray {
            return Err(self.error(
                span,
                format!("{key} does not apply to group {group:?}'s telemetry = \"{source}\""),
            ));
        }
        Ok(Some(match source {
            TelemetrySource::Linux => GroupTelemetry::Linux,
            TelemetrySource::CountersDb if template.learns_from.is_some() => {
                match self.counters_db_template(group, template)? {
                    Some(template) => GroupTelemetry::CountersDbTemplate { template },
                    // This switch's own COUNTERS_DB, each learned next
                    // hop's port by its interface name.
                    None => GroupTelemetry::CountersDb {
                        ports: Vec::new(),
                        switches: Vec::new(),
                    },
                }
            }
            TelemetrySource::CountersDb => {
                let mut ports = Vec::with_capacity(paths.len());
                let mut switches = Vec::with_capacity(paths.len());
                for (path, spec) in paths.into_iter().zip(specs) {
                    let switch = path
                        .counters_db
                        .map(|address| self.counters_db_address(&address, "counters_db"))
                        .transpose()?;
                    if switch.is_none() && settings.counters_db.is_none() {
                        return Err(self.error(
                            source_key.span(),
                            format!(
                                "group {group:?} reads counters-db, but [telemetry] has no \
                                 counters_db address (e.g. \"unix:/var/run/redis/redis.sock\") \
                                 and not every next hop names its own"
                            ),
                        ));
                    }
                    switches.push(switch);
                    ports.push(path.sonic_port.map_or_else(
                        || Ok(spec.interface.clone()),
                        |port| self.name(port, "sonic_port", NAME_MAX_LEN),
                    )?);
                }
                GroupTelemetry::CountersDb { ports, switches }
            }
            TelemetrySource::Remote if template.learns_from.is_some() => {
                self.remote_template(group, source_key.span(), template)?
            }
            TelemetrySource::Remote => {
                let mut targets = Vec::with_capacity(paths.len());
                for path in paths {
                    let (Some(url), Some(device)) = (path.url, path.device) else {
                        return Err(self.error(
                            path.span,
                            format!(
                                "next hop of group {group:?} (telemetry = \"remote\") needs \
                                 telemetry_url and telemetry_device"
                            ),
                        ));
                    };
                    remote::check_url(url.get_ref()).map_err(|why| {
                        self.error(
                            url.span(),
                            format!("telemetry_url {:?}: {why}", url.get_ref()),
                        )
                    })?;
                    targets.push(remote::Target {
                        url: url.into_inner(),
                        device: self.name(device, "telemetry_device", NAME_MAX_LEN)?,
                    });
                }
                GroupTelemetry::Remote { targets }
            }
        }))
    }
}

impl Ctx<'_> {
    /// A learning group's `remote` telemetry: both templates, each with
    /// known placeholders only, the URL one that makes a URL, the device
    /// one that fits a device label whatever it is filled with.
    fn remote_template(
        &self,
        group: &str,
        source_span: Range<usize>,
        template: Template,
    ) -> Result<GroupTelemetry, ConfigError> {
        let whose = template.learns_from.unwrap_or("its routes");
        let (Some(url), Some(device)) = (template.url, template.device) else {
            return Err(self.error(
                source_span,
                format!(
                    "group {group:?} follows {whose}: its next hops are learned, so \
                     telemetry = \"remote\" needs telemetry_url and telemetry_device at the \
                     group, templates in which {{ip}} and {{interface}} stand for each next \
                     hop's address and port, e.g. telemetry_url = \
                     \"http://{{ip}}:9100/metrics\", telemetry_device = \"eth1\""
                ),
            ));
        };
        let switches = match template.switches {
            Some(switches) => {
                self.switch_addresses(switches, &url, "telemetry_url", REMOTE_EXAMPLE)?
            }
            None => BTreeMap::new(),
        };
        TargetTemplate::check(url.get_ref(), true, switches.values().map(String::as_str))
            .map_err(|why| self.error(url.span(), format!("telemetry_url {why}")))?;
        Ok(GroupTelemetry::RemoteTemplate {
            template: TargetTemplate {
                url: url.into_inner(),
                device: self.device_template(device, "telemetry_device")?,
                switches,
            },
        })
    }

    /// A learning group's `counters-db` templates: `counters_db`, which must
    /// make a Redis address of the next switch's for each next hop, and
    /// `sonic_port` (the port read there, by default the interface's name
    /// on this switch); `None` without either, for this switch's own
    /// COUNTERS_DB.
    fn counters_db_template(
        &self,
        group: &str,
        template: Template,
    ) -> Result<Option<TargetTemplate>, ConfigError> {
        let Some(address) = template.counters_db else {
            let keys = port_or_address(&template.sonic_port, &None)
                .or_else(|| (template.switches.as_ref()).map(|s| (s.span(), "switch_addresses")));
            if let Some((span, key)) = keys {
                return Err(self.error(
                    span,
                    format!(
                        "{key} makes a learned next hop's counters-db path with the group's \
                         counters_db template, which group {group:?} has none of: write e.g. \
                         counters_db = \"{COUNTERS_DB_EXAMPLE}\""
                    ),
                ));
            }
            return Ok(None);
        };
        let text = address.get_ref();
        if ![TEMPLATE_SWITCH, TEMPLATE_IP]
            .iter()
            .any(|p| text.contains(p))
        {
            return Err(self.error(
                address.span(),
                format!(
                    "counters_db {text:?} at group {group:?} would read one switch for every \
                     learned next hop: write {TEMPLATE_SWITCH} or {TEMPLATE_IP} for each one's \
                     own, e.g. \"{COUNTERS_DB_EXAMPLE}\", or [telemetry] counters_db to read \
                     this switch's"
                ),
            ));
        }
        let switches = match template.switches {
            Some(switches) => {
                self.switch_addresses(switches, &address, "counters_db", COUNTERS_DB_EXAMPLE)?
            }
            None => BTreeMap::new(),
        };
        let parses = |s: &str| s.parse::<counters_db::Address>().map(drop);
        TargetTemplate::check_with(text, true, switches.values().map(String::as_str), parses)
            .map_err(|why| self.error(address.span(), format!("counters_db {why}")))?;
        let port = match template.sonic_port {
            Some(port) => self.device_template(port, "sonic_port")?,
            None => TEMPLATE_INTERFACE.to_owned(),
        };
        Ok(Some(TargetTemplate {
            url: address.into_inner(),
            device: port,
            switches,
        }))
    }

    /// `switch_addresses`: port names, each with a host for `key`'s
    /// `{switch}` in `text` (its check then tries each one in it).
    fn switch_addresses(
        &self,
        switches: Spanned<BTreeMap<String, Spanned<String>>>,
        text: &Spanned<String>,
        key: &str,
        example: &str,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        if !text.get_ref().contains(TEMPLATE_SWITCH) {
            return Err(self.error(
                switches.span(),
                format!(
                    "switch_addresses is read only through {TEMPLATE_SWITCH} in {key}, which \
                     has none: write e.g. {key} = \"{example}\""
                ),
            ));
        }
        let mut out = BTreeMap::new();
        for (port, host) in switches.into_inner() {
            // A key has no span of its own: errors point at its value.
            let span = host.span();
            let port = self.ifname(Spanned::new(span.clone(), port))?;
            let host = host.into_inner();
            if host.is_empty() || host.contains(|c: char| "{}/@ ".contains(c)) {
                return Err(self.error(
                    span,
                    format!(
                        "switch_addresses: {host:?} (port {port:?}) is no address or host \
                         name, e.g. \"192.0.2.11\" or \"[2001:db8::11]\""
                    ),
                ));
            }
            out.insert(port, host);
        }
        Ok(out)
    }

    /// A `telemetry_device` or `sonic_port` template (`key`): known
    /// placeholders only, and a label that fits whatever they are filled
    /// with.
    pub(super) fn device_template(
        &self,
        device: Spanned<String>,
        key: &str,
    ) -> Result<String, ConfigError> {
        TargetTemplate::check(device.get_ref(), false, [])
            .map_err(|why| self.error(device.span(), format!("{key} {why}")))?;
        let longest = TargetTemplate::longest(device.get_ref());
        if longest.len() > NAME_MAX_LEN {
            return Err(self.error(
                device.span(),
                format!(
                    "{key} {:?} may make a label of {} bytes (with {{ip}} an IPv6 address, \
                     {{interface}} 15 bytes); at most {NAME_MAX_LEN} are allowed",
                    device.get_ref(),
                    longest.len()
                ),
            ));
        }
        self.name(device, key, NAME_MAX_LEN)
    }
}

impl PathKeys {
    fn url_or_device(&self) -> Option<(Range<usize>, &'static str)> {
        url_or_device(&self.url, &self.device)
    }

    fn first_key(&self) -> Option<(Range<usize>, &'static str)> {
        self.url_or_device().or_else(|| self.counters_keys())
    }

    fn counters_keys(&self) -> Option<(Range<usize>, &'static str)> {
        port_or_address(&self.sonic_port, &self.counters_db)
    }
}
