"""Decodes RoCEv2 frames from a pcap with scapy and prints one JSON object
per frame: what an independent decoder makes of fabriclb's generator."""

import json
import sys

from scapy.all import IP, UDP, Ether, rdpcap
from scapy.contrib.roce import BTH

for frame in rdpcap(sys.argv[1]):
    raw = bytes(frame)
    pkt = Ether(raw)
    ip, bth = pkt[IP], pkt[BTH]
    rebuilt_ip = IP(bytes(ip))
    del rebuilt_ip.chksum
    print(json.dumps({
        "src": ip.src,
        "dst": ip.dst,
        "ttl": ip.ttl,
        "ip_checksum_ok": IP(bytes(rebuilt_ip)).chksum == ip.chksum,
        "ip_len": ip.len,
        "udp_sport": pkt[UDP].sport,
        "udp_dport": pkt[UDP].dport,
        "udp_len": pkt[UDP].len,
        "opcode": bth.opcode,
        "dqpn": bth.dqpn,
        "psn": bth.psn,
        "pkey": bth.pkey,
        "icrc_ok": bth.compute_icrc(None) == raw[-4:],
        "payload_len": len(bytes(bth.payload)),
    }))
