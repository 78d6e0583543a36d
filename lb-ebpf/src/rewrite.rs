//! Stage 4: the packet as the next hop receives it: its L2 header, TTL or
//! hop limit one less.

use aya_ebpf::{helpers::bpf_xdp_adjust_head, programs::XdpContext};
use lb_common::{
    abi::NextHop,
    packet::{
        checksum::{L2_OUT_MAX, egress_l2_header, ipv4_csum_after_ttl_decrement},
        parse::{ETH_HLEN, ETH_P_IPV4, ETH_P_IPV6, IPV4_MIN_HLEN, IPV6_HLEN, Parsed},
    },
    verdict::Reason,
};

/// Replaces the L2 header with the next hop's and decrements TTL / hop
/// limit. Nothing is written unless the whole rewrite can be done.
// Not inlined, for the same reason as `parse::parse_frame`.
#[inline(never)]
pub fn rewrite(ctx: &XdpContext, parsed: &Parsed, nh: &NextHop) -> Result<(), Reason> {
    let is_ipv6 = parsed.flow.is_ipv6;
    let ethertype = if is_ipv6 { ETH_P_IPV6 } else { ETH_P_IPV4 };
    let (header, out_len) = egress_l2_header(&nh.dst_mac, &nh.src_mac, nh.vlan, ethertype);
    // Ingress tags go, the next hop's tag (if any) comes: move the start.
    let shrink = parsed.l3_offset as i32 - out_len as i32;
    // SAFETY: plain helper call on our own context.
    if shrink != 0 && unsafe { bpf_xdp_adjust_head(ctx.ctx, shrink) } != 0 {
        return Err(Reason::Unsupported);
    }
    let (start, end) = (ctx.data(), ctx.data_end());
    // The parser saw a whole IP header, so this holds; the verifier needs
    // to see it checked against the new start.
    if start + L2_OUT_MAX + IPV6_HLEN > end && start + out_len + IPV4_MIN_HLEN > end {
        return Err(Reason::L3Malformed);
    }
    if out_len == L2_OUT_MAX {
        write_l2::<L2_OUT_MAX>(start, end, &header)?;
        decrement_ttl(start + L2_OUT_MAX, end, is_ipv6)
    } else {
        write_l2::<ETH_HLEN>(start, end, &header)?;
        decrement_ttl(start + ETH_HLEN, end, is_ipv6)
    }
}

#[inline(always)]
fn write_l2<const LEN: usize>(
    start: usize,
    end: usize,
    header: &[u8; L2_OUT_MAX],
) -> Result<(), Reason> {
    if start + LEN > end {
        return Err(Reason::L3Malformed);
    }
    // In 64-, 32- and 16-bit words: a byte array's copy is a store per
    // byte. The object allows misaligned access (see .cargo/config.toml).
    let word = |at: usize, n: usize| {
        let mut bytes = [0u8; 8];
        bytes[..n].copy_from_slice(&header[at..at + n]);
        u64::from_ne_bytes(bytes)
    };
    let mut at = 0;
    // SAFETY: every store lies in `start..start + LEN`, checked above.
    unsafe {
        while at + 8 <= LEN {
            core::ptr::write_unaligned((start + at) as *mut u64, word(at, 8));
            at += 8;
        }
        if at + 4 <= LEN {
            core::ptr::write_unaligned((start + at) as *mut u32, word(at, 4) as u32);
            at += 4;
        }
        if at + 2 <= LEN {
            core::ptr::write_unaligned((start + at) as *mut u16, word(at, 2) as u16);
        }
    }
    Ok(())
}

#[inline(always)]
fn decrement_ttl(l3: usize, end: usize, is_ipv6: bool) -> Result<(), Reason> {
    if is_ipv6 {
        if l3 + IPV6_HLEN > end {
            return Err(Reason::L3Malformed);
        }
        // SAFETY: hop limit is byte 7 of the IPv6 header, inside the packet.
        unsafe { *((l3 + 7) as *mut u8) -= 1 };
    } else {
        if l3 + IPV4_MIN_HLEN > end {
            return Err(Reason::L3Malformed);
        }
        // SAFETY: TTL/protocol word at 8 and checksum at 10, inside the packet.
        unsafe {
            let word = (l3 + 8) as *mut [u8; 2];
            let csum = (l3 + 10) as *mut [u8; 2];
            let ttl_proto = u16::from_be_bytes(*word);
            let new = ipv4_csum_after_ttl_decrement(u16::from_be_bytes(*csum), ttl_proto);
            (*word)[0] -= 1;
            *csum = new.to_be_bytes();
        }
    }
    Ok(())
}
