//! The CPUs' loads on the next hops that groups choose among by load,
//! and toward those groups' classes, shared between them.

use super::Running;
use crate::dataplane::Dataplane;

impl Running {
    pub(super) fn share_loads(&mut self, dp: &mut Dataplane) {
        let members = self.tables.dynamic_members();
        let classes = self.tables.dynamic_class_loads();
        self.peer_loads.tick(dp, &members, &classes);
    }
}
