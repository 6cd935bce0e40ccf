//! The client's address behind proxies (`[server] trusted_proxies`).
//!
//! Behind a load balancer every TCP peer is the balancer, so `client_ip` keys would put every
//! client in one bucket. The proxies in front say who the client was in `Forwarded: for=`
//! (RFC 7239) or `X-Forwarded-For`, each appending the address it received the request
//! from — so the list is only as trustworthy as the hop that appended each entry. The rule
//! (Envoy's `xff_num_trusted_hops` generalised to address ranges, nginx's
//! `real_ip_recursive on`): start from the TCP peer; while the address at hand is trusted,
//! step one entry to the left; the first untrusted address is the client. A peer outside
//! `trusted_proxies` is the client whatever its headers say, so a client cannot spoof its
//! address by sending the headers itself. `Forwarded` is preferred when present.
//!
//! An entry that is not an address (`unknown`, an obfuscated `_hidden` identifier, garbage)
//! ends the walk: the client is the trusted hop that passed it on, the last address known.
//! Every header line counts, in order: a proxy that adds its own line instead of appending
//! to the existing one is read the same as one that appends.

use crate::descriptor::Headers;
use core::net::IpAddr;
use ipnet::IpNet;

/// The client address of a request from `peer` with `headers`, trusting `trusted`.
pub(crate) fn client_address(
    peer: Option<IpAddr>,
    headers: &dyn Headers,
    trusted: &[IpNet],
) -> Option<IpAddr> {
    let peer = peer?;
    if !is_trusted(trusted, peer) {
        return Some(peer);
    }
    let mut hops: Vec<Hop> = Vec::new();
    headers.for_each("forwarded", &mut |v| forwarded_for(v, &mut hops));
    if hops.is_empty() {
        headers.for_each("x-forwarded-for", &mut |v| {
            for item in v.split(|&b| b == b',') {
                hops.push(parse_addr(trim(item)));
            }
        });
    }
    let mut client = peer;
    for hop in hops.iter().rev() {
        if !is_trusted(trusted, client) {
            break;
        }
        match hop {
            Hop::Addr(a) => client = *a,
            Hop::Unknown => break,
        }
    }
    Some(client)
}

fn is_trusted(trusted: &[IpNet], ip: IpAddr) -> bool {
    // An IPv4 client seen through an IPv6 socket (`::ffff:10.0.0.1`) is its IPv4 address.
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    trusted.iter().any(|n| n.contains(&ip))
}

/// One entry of a forwarding list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hop {
    Addr(IpAddr),
    /// `unknown`, an obfuscated identifier, or not an address.
    Unknown,
}

fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

/// `for=` of every element of a `Forwarded` value (`for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`).
fn forwarded_for(value: &[u8], out: &mut Vec<Hop>) {
    for element in value.split(|&b| b == b',') {
        let fors = element.split(|&b| b == b';').filter_map(|pair| {
            let pair = trim(pair);
            let eq = pair.iter().position(|&b| b == b'=')?;
            let (k, v) = (&pair[..eq], &pair[eq + 1..]);
            k.eq_ignore_ascii_case(b"for").then_some(v)
        });
        for v in fors {
            let v = trim(v);
            let v = v
                .strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(v);
            out.push(parse_addr(v));
        }
    }
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:4711`.
fn parse_addr(b: &[u8]) -> Hop {
    let Ok(s) = core::str::from_utf8(b) else {
        return Hop::Unknown;
    };
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Hop::Addr(ip);
    }
    if let Some(rest) = s.strip_prefix('[') {
        let inner = rest.split(']').next().unwrap_or("");
        return inner.parse().map_or(Hop::Unknown, Hop::Addr);
    }
    match s.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|c| c.is_ascii_digit()) => {
            host.parse().map_or(Hop::Unknown, Hop::Addr)
        }
        _ => Hop::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn client(peer: &str, headers: &[(&str, &str)], trusted: &[&str]) -> IpAddr {
        client_address(Some(ip(peer)), &headers, &nets(trusted)).unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        let spoof = [("x-forwarded-for", "1.2.3.4"), ("forwarded", "for=5.6.7.8")];
        assert_eq!(client("203.0.113.9", &spoof, &[]), ip("203.0.113.9"));
        assert_eq!(
            client("203.0.113.9", &spoof, &["10.0.0.0/8"]),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn walks_right_to_left_past_trusted_hops() {
        let h = [("x-forwarded-for", "1.2.3.4, 198.51.100.7, 10.0.0.2")];
        // 10.0.0.1 (peer, trusted) says 10.0.0.2 (trusted) said 198.51.100.7: the client.
        assert_eq!(client("10.0.0.1", &h, &["10.0.0.0/8"]), ip("198.51.100.7"));
        // Everything trusted: the left-most address.
        assert_eq!(
            client(
                "10.0.0.1",
                &h,
                &["10.0.0.0/8", "198.51.100.0/24", "1.2.3.4/32"]
            ),
            ip("1.2.3.4")
        );
        // Several header lines are one list.
        let lines = [
            ("x-forwarded-for", "1.2.3.4"),
            ("x-forwarded-for", "198.51.100.7"),
        ];
        let got = client_address(
            Some(ip("10.0.0.1")),
            &MultiLine(&lines),
            &nets(&["10.0.0.0/8"]),
        );
        assert_eq!(got, Some(ip("198.51.100.7")));
    }

    #[test]
    fn forwarded_is_preferred_and_parsed() {
        let h = [
            ("x-forwarded-for", "9.9.9.9"),
            (
                "forwarded",
                "for=192.0.2.43;proto=https, for=\"[2001:db8:cafe::17]:4711\";by=10.0.0.1",
            ),
        ];
        assert_eq!(
            client("10.0.0.1", &h, &["10.0.0.0/8"]),
            ip("2001:db8:cafe::17")
        );
        assert_eq!(
            client("10.0.0.1", &h, &["10.0.0.0/8", "2001:db8::/32"]),
            ip("192.0.2.43")
        );
    }

    #[test]
    fn unknown_entries_stop_at_the_last_address_known() {
        let h = [("forwarded", "for=198.51.100.1, for=unknown, for=_hidden")];
        assert_eq!(client("10.0.0.1", &h, &["10.0.0.0/8"]), ip("10.0.0.1"));
        let h = [("x-forwarded-for", "198.51.100.1, garbage, 10.0.0.9:8080")];
        assert_eq!(client("10.0.0.1", &h, &["10.0.0.0/8"]), ip("10.0.0.9"));
        // No header at all: the trusted peer itself.
        assert_eq!(client("10.0.0.1", &[], &["10.0.0.0/8"]), ip("10.0.0.1"));
        // A mapped IPv4 peer is trusted as its IPv4 address.
        let h = [("x-forwarded-for", "198.51.100.1")];
        assert_eq!(
            client("::ffff:10.0.0.1", &h, &["10.0.0.0/8"]),
            ip("198.51.100.1")
        );
    }

    /// Header lines as a frontend holds them (several lines of one name).
    struct MultiLine<'a>(&'a [(&'a str, &'a str)]);
    impl Headers for MultiLine<'_> {
        fn get(&self, name: &str) -> Option<&[u8]> {
            Headers::get(self.0, name)
        }
        fn for_each(&self, name: &str, f: &mut dyn FnMut(&[u8])) {
            for (k, v) in self.0 {
                if k.eq_ignore_ascii_case(name) {
                    f(v.as_bytes());
                }
            }
        }
    }

    proptest::proptest! {
        /// An untrusted peer is the client whatever headers it sends; a trusted peer's
        /// answer is always the peer or an address from the headers.
        #[test]
        fn spoofing_from_untrusted_peers_never_works(
            a in proptest::array::uniform4(0u8..), xff in "[0-9a-f.:, \\[\\]\"=;]{0,60}",
        ) {
            let peer = IpAddr::from(a);
            let trusted = nets(&["10.0.0.0/8"]);
            let h = [("x-forwarded-for", xff.as_str()), ("forwarded", xff.as_str())];
            let got = client_address(Some(peer), &h, &trusted).unwrap();
            if !is_trusted(&trusted, peer) {
                proptest::prop_assert_eq!(got, peer);
            }
        }
    }
}
