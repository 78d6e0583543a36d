//! The flow events' maps: the ring the daemon reads, what it asks of
//! each CPU, and what became of the events each CPU had.

use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use lb_common::abi::events::{self as names, EventBudget, EventConfig};

use super::{Dataplane, DataplaneError, Result, map_err, take};

impl Dataplane {
    /// The ring of flow events, for one reader: taken out of the object.
    pub fn take_flow_events(&mut self) -> Result<RingBuf<MapData>> {
        take(&mut self.ebpf, names::FLOW_EVENTS)
    }

    /// What each CPU may send from now on.
    pub fn configure_events(&mut self, config: EventConfig) -> Result<()> {
        let map = (self.ebpf.map_mut(names::EVENT_CONFIG)).ok_or(DataplaneError::MissingMap {
            name: names::EVENT_CONFIG,
        })?;
        let mut array: Array<&mut MapData, EventConfig> =
            Array::try_from(map).map_err(map_err(names::EVENT_CONFIG))?;
        array
            .set(0, config, 0)
            .map_err(map_err(names::EVENT_CONFIG))
    }

    /// What became of the events, summed over CPUs.
    pub fn event_totals(&self) -> Result<EventBudget> {
        let map = (self.ebpf.map(names::EVENT_BUDGET)).ok_or(DataplaneError::MissingMap {
            name: names::EVENT_BUDGET,
        })?;
        let budgets: PerCpuArray<&MapData, EventBudget> =
            PerCpuArray::try_from(map).map_err(map_err(names::EVENT_BUDGET))?;
        let per_cpu = budgets.get(&0, 0).map_err(map_err(names::EVENT_BUDGET))?;
        Ok(per_cpu
            .iter()
            .fold(EventBudget::default(), |sum, b| EventBudget {
                sent: sum.sent + b.sent,
                over_budget: sum.over_budget + b.over_budget,
                ring_full: sum.ring_full + b.ring_full,
                ..sum
            }))
    }
}
