//! fabriclb's forwarding path in XDP. All decisions come from `lb-common`;
//! this crate reads the packet, looks up maps, writes headers and counts
//! verdicts. `src/main.rs` declares the programs over it.
//!
//! One module per stage of [`forward::process`], in the order it runs them:
//! [`parse`], [`route`], [`select`], [`rewrite`], [`count`]; [`maps`] and
//! [`frame`] are what they share.
#![no_std]

pub mod count;
pub mod forward;
pub mod frame;
pub mod maps;
pub mod parse;
pub mod rewrite;
pub mod route;
pub mod select;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
