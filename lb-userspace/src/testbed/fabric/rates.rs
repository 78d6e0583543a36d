//! The rate of each spine's port toward each leaf: what `--link-rates`
//! says, e.g. `200` (every port) or `200,s2:l3=50` (every port at 200
//! Mbit/s but spine 2's toward leaf 3 at 50).

use std::collections::BTreeMap;
use std::str::FromStr;

/// Per spine port toward a leaf, its TBF rate in Mbit/s; ports not named
/// take the default, or run unshaped without one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkRates {
    default: Option<u32>,
    /// (spine, leaf), both 1-based.
    ports: BTreeMap<(usize, usize), u32>,
}

impl LinkRates {
    /// Every port at `mbit`.
    pub fn all(mbit: u32) -> Self {
        Self {
            default: Some(mbit),
            ports: BTreeMap::new(),
        }
    }

    /// Spine `spine`'s port toward leaf `leaf` at `mbit`.
    pub fn with(mut self, spine: usize, leaf: usize, mbit: u32) -> Self {
        self.ports.insert((spine, leaf), mbit);
        self
    }

    /// The rate of spine `spine`'s port toward leaf `leaf`, if shaped.
    pub fn rate(&self, spine: usize, leaf: usize) -> Option<u32> {
        self.ports.get(&(spine, leaf)).copied().or(self.default)
    }

    /// The ports named, for checking them against the fabric.
    pub fn named(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.ports.keys().copied()
    }
}

impl FromStr for LinkRates {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut rates = Self::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let mbit = |value: &str| match value.parse::<u32>() {
                Ok(0) | Err(_) => Err(format!(
                    "{item:?}: a rate is a whole number of Mbit/s above 0"
                )),
                Ok(mbit) => Ok(mbit),
            };
            match item.split_once('=') {
                None if rates.default.is_none() => rates.default = Some(mbit(item)?),
                None => return Err(format!("{item:?}: a second rate for every port")),
                Some((port, value)) => {
                    let port = parse_port(port).ok_or_else(|| {
                        format!("{item:?}: name a port as sJ:lK (spine J's port toward leaf K)")
                    })?;
                    if rates.ports.insert(port, mbit(value)?).is_some() {
                        return Err(format!("{item:?}: that port's rate is given twice"));
                    }
                }
            }
        }
        Ok(rates)
    }
}

/// `sJ:lK` as (J, K), both at least 1.
fn parse_port(port: &str) -> Option<(usize, usize)> {
    let (spine, leaf) = port.trim().split_once(':')?;
    let number = |text: &str, prefix: char| {
        text.strip_prefix(prefix)?
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 1)
    };
    Some((number(spine, 's')?, number(leaf, 'l')?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_and_ports_named_apart() {
        let rates: LinkRates = "200, s2:l3=50".parse().expect("valid");
        assert_eq!(rates, LinkRates::all(200).with(2, 3, 50));
        assert_eq!(rates.rate(2, 3), Some(50));
        assert_eq!(rates.rate(3, 2), Some(200));
        let only: LinkRates = "s1:l1=10".parse().expect("valid");
        assert_eq!((only.rate(1, 1), only.rate(1, 2)), (Some(10), None));
        assert_eq!("".parse::<LinkRates>(), Ok(LinkRates::default()));
    }

    #[test]
    fn bad_rates_say_which_and_why() {
        let err = |text: &str| text.parse::<LinkRates>().expect_err(text);
        assert!(err("0").contains("above 0"), "{}", err("0"));
        assert!(err("fast").contains("whole number"));
        assert!(err("200,100").contains("a second rate"));
        assert!(err("s2=50").contains("sJ:lK"));
        assert!(err("s0:l1=50").contains("sJ:lK"));
        assert!(err("s1:l1=5,s1:l1=6").contains("given twice"));
    }
}
