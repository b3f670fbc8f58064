//! What an address (or a name) is, for the egress decision: the public
//! internet, the daemon's loopback, a private network, a cloud metadata
//! service, or something else that is never reached. Metadata services are
//! listed by address and name and checked before the private ranges, so no
//! setting opens them even where they sit inside a private range
//! (Alibaba's in 100.64/10, AWS's IPv6 one in fc00::/7).

use super::Reach;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What an address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AddressClass {
    Public,
    /// The daemon host's own loopback.
    Loopback,
    /// Private networks: RFC 1918, shared (CGNAT), unique local.
    Private,
    /// A cloud provider's instance metadata (or a service beside it, such
    /// as AWS's time and pod-identity endpoints): never reached.
    Metadata,
    /// Link-local, unspecified, multicast, broadcast, reserved,
    /// benchmarking, IETF-assigned, and IPv6 translators into IPv4 (NAT64,
    /// 6to4) and the old site-local: never reached.
    Closed,
}

/// Cloud metadata services and their neighbours, by IPv4 address.
const METADATA_V4: [Ipv4Addr; 6] = [
    // AWS, GCP, Azure, OCI, DigitalOcean and most others.
    Ipv4Addr::new(169, 254, 169, 254),
    // AWS ECS task metadata and credentials.
    Ipv4Addr::new(169, 254, 170, 2),
    // AWS EKS pod identity agent.
    Ipv4Addr::new(169, 254, 170, 23),
    // AWS time sync.
    Ipv4Addr::new(169, 254, 169, 123),
    // Alibaba Cloud, inside the shared range 100.64/10.
    Ipv4Addr::new(100, 100, 100, 200),
    // Azure's WireServer (VM agent and extension settings), a public-range
    // address that only answers from inside Azure.
    Ipv4Addr::new(168, 63, 129, 16),
];

/// GCP's metadata server over IPv6, inside fc00::/7.
const GCP_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254);

/// Names that reach a metadata service whatever they resolve to.
const METADATA_NAMES: [&str; 1] = ["metadata.google.internal"];

pub(super) fn address_class(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4_class(v4),
            None => v6_class(v6),
        },
    }
}

fn v4_class(v4: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = v4.octets();
    if METADATA_V4.contains(&v4) {
        AddressClass::Metadata
    } else if v4.is_loopback() {
        AddressClass::Loopback
    } else if v4.is_private() || (a == 100 && (64..128).contains(&b)) {
        AddressClass::Private
    } else if v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || a == 0
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240
    {
        AddressClass::Closed
    } else {
        AddressClass::Public
    }
}

fn v6_class(v6: Ipv6Addr) -> AddressClass {
    let segments = v6.segments();
    let first = segments[0];
    // fd00:ec2::/64 is AWS's block of instance services (metadata at ::254,
    // time at ::123, DNS at ::253, pod identity at ::23).
    if segments[..4] == [0xfd00, 0x0ec2, 0, 0] || v6 == GCP_METADATA_V6 {
        AddressClass::Metadata
    } else if v6.is_loopback() {
        AddressClass::Loopback
    } else if (first & 0xfe00) == 0xfc00 {
        AddressClass::Private
    } else if v6.is_unspecified()
        || v6.is_multicast()
        || (first & 0xffc0) == 0xfe80
        || (first & 0xffc0) == 0xfec0
        || segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
        || first == 0x2002
    {
        AddressClass::Closed
    } else {
        AddressClass::Public
    }
}

/// Whether `host` (as the client wrote it) names a metadata service.
pub(super) fn is_metadata_name(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    METADATA_NAMES.iter().any(|name| host.eq_ignore_ascii_case(name))
}

impl Reach {
    /// Why a connection to `ip` is refused, or `None` when this reach
    /// opens it. Metadata, link-local and reserved addresses are refused
    /// whatever is opened.
    pub(super) fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        match address_class(ip) {
            AddressClass::Public => None,
            AddressClass::Private if self.private => None,
            AddressClass::Loopback if self.loopback => None,
            AddressClass::Private => {
                Some("a private address; an operator may allow those with sandbox.egress.allow_private")
            }
            AddressClass::Loopback => {
                Some("the daemon's loopback; an operator may allow it with sandbox.egress.allow_loopback")
            }
            AddressClass::Metadata => Some("a cloud metadata address, which no setting opens"),
            AddressClass::Closed => Some("a link-local or reserved address, which no setting opens"),
        }
    }
}

/// Everything that is not the public internet.
pub fn is_internal(ip: IpAddr) -> bool {
    address_class(ip) != AddressClass::Public
}
