//! Packets: parsing headers, RoCEv2 semantics, the header rewrite's
//! checksum arithmetic, and (for the generator and tests) building frames.

pub mod checksum;
#[cfg(any(test, feature = "craft"))]
pub mod craft;
pub mod parse;
pub mod roce;
