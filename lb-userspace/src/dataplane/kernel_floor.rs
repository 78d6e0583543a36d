//! What the forwarding program needs of the kernel, and which Linux first
//! had it. The kernel itself is the probe: what it refuses, at the map's
//! creation or the program's load, is named here in one line with the
//! version that has it, ahead of the verifier's own words. A version
//! number alone would refuse distribution kernels that backport these
//! (RHEL 9's 5.14 has `bpf_loop`).

use lb_common::abi as names;

/// The oldest mainline Linux with everything below: `bpf_loop`'s.
pub const MINIMUM_LINUX: &str = "5.17";

/// The helpers the program calls: (id in `enum bpf_func_id`, name, the
/// first Linux with it).
const HELPERS: &[(u32, &str, &str)] = &[
    (5, "bpf_ktime_get_ns", "4.1"),
    (44, "bpf_xdp_adjust_head", "4.10"),
    (51, "bpf_redirect_map", "4.14"),
    (113, "bpf_probe_read_kernel", "5.5"),
    (181, "bpf_loop", "5.17"),
];

/// The program's maps of a type a kernel may lack: (the map, its type,
/// the first Linux with it).
const MAP_TYPES: &[(&str, &str, &str)] = &[(names::DEVMAP, "BPF_MAP_TYPE_DEVMAP_HASH", "5.4")];

/// The helper a verifier log says this kernel does not have: the
/// verifier names an id it does not know `invalid func unknown#181`, and
/// one it knows but does not give this program type `program of this
/// type cannot use helper bpf_loop#181` (older kernels: `unknown func
/// bpf_loop#181`).
pub fn missing_helper(verifier_log: &str) -> Option<String> {
    verifier_log.lines().find_map(|line| {
        if !(line.contains("invalid func ")
            || line.contains("unknown func ")
            || line.contains("cannot use helper "))
        {
            return None;
        }
        let id: u32 = line
            .rsplit_once('#')?
            .1
            .trim()
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .ok()?;
        let (_, name, since) = HELPERS.iter().find(|(known, _, _)| *known == id)?;
        Some(format!(
            "this kernel ({}) lacks the helper {name}, which Linux {since} brought \
             (fabriclb needs {MINIMUM_LINUX} or a kernel with it backported)",
            release()
        ))
    })
}

/// The map type a refused creation of map `map` most likely lacks:
/// refused with EINVAL, the kernel's answer to a type it does not know.
pub fn missing_map_type(map: &str, errno: Option<i32>) -> Option<String> {
    if errno != Some(libc::EINVAL) {
        return None;
    }
    let (_, kernel_name, since) = MAP_TYPES.iter().find(|(name, _, _)| *name == map)?;
    Some(format!(
        "this kernel ({}) may lack {kernel_name}, which Linux {since} brought \
         (fabriclb needs {MINIMUM_LINUX})",
        release()
    ))
}

/// The running kernel's release, as `uname -r` says it.
fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| format!("Linux {}", r.trim()))
        .unwrap_or_else(|_| "Linux of unknown release".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_the_kernel_does_not_know_is_named_with_its_version() {
        for line in [
            "; bpf_loop(n, cb, ctx, 0)\n23: (85) call unknown#181\ninvalid func unknown#181",
            "23: (85) call bpf_loop#181\nunknown func bpf_loop#181",
            "program of this type cannot use helper bpf_loop#181",
        ] {
            let said = missing_helper(line).expect(line);
            assert!(
                said.starts_with("this kernel (Linux ")
                    && said.ends_with(
                        ") lacks the helper bpf_loop, which Linux 5.17 brought (fabriclb needs \
                         5.17 or a kernel with it backported)"
                    ),
                "{said}"
            );
        }
        // Helpers the program does not call, and other refusals, are not
        // blamed on the kernel's age.
        assert_eq!(missing_helper("invalid func unknown#212"), None);
        assert_eq!(missing_helper("R1 invalid mem access 'scalar'"), None);
    }

    #[test]
    fn only_an_einval_for_a_newer_map_type_is_blamed_on_the_kernel() {
        let said = missing_map_type(names::DEVMAP, Some(libc::EINVAL)).expect("named");
        assert!(
            said.ends_with(
                "may lack BPF_MAP_TYPE_DEVMAP_HASH, which Linux 5.4 brought (fabriclb needs 5.17)"
            ),
            "{said}"
        );
        assert_eq!(missing_map_type(names::DEVMAP, Some(libc::EPERM)), None);
        assert_eq!(missing_map_type(names::ROUTES_V4, Some(libc::EINVAL)), None);
    }
}
