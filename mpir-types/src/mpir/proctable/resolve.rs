//! Resolution of raw entries with their fetched strings: names decoded once per address,
//! interned by content, and checked for plausibility.

use super::decode::RawProcDesc;
use super::ranks::{
    EntryField, EntryProblem, Implausible, NameId, ProblemKind, ProcEntry, ResolvedTable,
    implausible,
};

/// The strings fetched for [`resolve`], position by position: the bytes (without NUL) at the
/// `i`-th address, or why they could not be read. Implemented for slices of results, and by
/// target crates for their own batch types, so that a million strings need no conversion.
pub trait FetchedStrings {
    /// Number of positions.
    fn count(&self) -> usize;
    /// Position `i`; `None` past the end.
    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>>;
}

impl<B: AsRef<[u8]>, E: std::fmt::Display> FetchedStrings for [std::result::Result<B, E>] {
    fn count(&self) -> usize {
        self.len()
    }

    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>> {
        self.get(i)
            .map(|r| r.as_ref().map(AsRef::as_ref).map_err(ToString::to_string))
    }
}

impl<B: AsRef<[u8]>, E: std::fmt::Display> FetchedStrings for Vec<std::result::Result<B, E>> {
    fn count(&self) -> usize {
        self.len()
    }

    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>> {
        self.as_slice().fetched(i)
    }
}

impl<B: AsRef<[u8]>, E: std::fmt::Display, const N: usize> FetchedStrings
    for [std::result::Result<B, E>; N]
{
    fn count(&self) -> usize {
        N
    }

    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>> {
        self.as_slice().fetched(i)
    }
}

/// Resolves raw entries with strings already fetched: `addresses` is
/// [`string_addresses`](super::string_addresses) of the entries (sorted, distinct) and
/// `strings[i]` the bytes (without NUL) at `addresses[i]`, or the reason they could not be read. Names are decoded as UTF-8 once per address (invalid
/// sequences replaced by U+FFFD) and shared between the entries that use them.
///
/// Lookups gallop from the previous hit, so tables whose strings are laid out in rank order or
/// cycle through a few hosts resolve in linear time; any table resolves in `O(n log n)`.
pub fn resolve<S: FetchedStrings + ?Sized>(
    entries: &[RawProcDesc],
    addresses: &[u64],
    strings: &S,
) -> ResolvedTable {
    resolve_in(entries, addresses, strings, None)
}

/// [`resolve`], knowing where the table itself lies (`table`: its first byte and its length in
/// bytes), so that a name pointer into the table is flagged. Names that are not plausible
/// (control bytes, invalid UTF-8, empty, inside the table) are kept and listed as
/// [`ProblemKind::Implausible`] for each rank that uses them.
pub fn resolve_in<S: FetchedStrings + ?Sized>(
    entries: &[RawProcDesc],
    addresses: &[u64],
    strings: &S,
    span: Option<(u64, u64)>,
) -> ResolvedTable {
    let mut table = ResolvedTable {
        entries: Vec::with_capacity(entries.len()),
        names: Vec::new(),
        problems: Vec::new(),
    };
    let mut names = NameCache::new(addresses, strings);
    names.span = span;
    for (rank, raw) in (0u64..).zip(entries) {
        let host = names.get(
            raw.host_name,
            rank,
            EntryField::HostName,
            &mut table.problems,
        );
        let executable = names.get(
            raw.executable_name,
            rank,
            EntryField::ExecutableName,
            &mut table.problems,
        );
        if raw.pid <= 0 {
            table.problems.push(EntryProblem {
                rank,
                field: EntryField::Pid,
                kind: ProblemKind::InvalidPid(raw.pid),
            });
        }
        table.entries.push(ProcEntry {
            rank,
            host,
            executable,
            pid: raw.pid,
        });
    }
    table.names = names.names;
    table
}

/// Finds `target` in sorted `v` by galloping from `from`: `O(log d)` for a distance `d`.
fn gallop(v: &[u64], from: usize, target: u64) -> Option<usize> {
    let from = from.min(v.len().saturating_sub(1));
    let here = *v.get(from)?;
    let (lo, hi) = if target >= here {
        let mut step = 1;
        let mut hi = from;
        while v.get(hi).is_some_and(|&x| x < target) {
            hi = from.saturating_add(step).min(v.len());
            step *= 2;
        }
        (from, hi.min(v.len().saturating_sub(1)) + 1)
    } else {
        let mut step = 1;
        let mut lo = from;
        while lo > 0 && v.get(lo).is_some_and(|&x| x > target) {
            lo = from.saturating_sub(step);
            step *= 2;
        }
        (lo, from + 1)
    };
    let window = v.get(lo..hi)?;
    window.binary_search(&target).ok().map(|i| lo + i)
}

/// Decodes each distinct string once and hands out ids; equal strings at different addresses
/// (starters that duplicate "node03" per rank) get one id too.
struct NameCache<'a, S: ?Sized> {
    addresses: &'a [u64],
    strings: &'a S,
    decoded: Vec<Option<NameId>>,
    by_content: std::collections::HashMap<&'a [u8], NameId>,
    names: Vec<Box<str>>,
    /// Last (index, address, id) looked up, for host names (0) and executable names (1).
    last: [(usize, u64, Option<NameId>); 2],
    /// Why each name (by id index) is not plausible, if it is not.
    doubts: Vec<Option<Implausible>>,
    /// The table's own bytes: (first address, length).
    span: Option<(u64, u64)>,
}

impl<'a, S: FetchedStrings + ?Sized> NameCache<'a, S> {
    fn new(addresses: &'a [u64], strings: &'a S) -> Self {
        NameCache {
            addresses,
            strings,
            decoded: vec![None; addresses.len().min(strings.count())],
            by_content: std::collections::HashMap::new(),
            names: Vec::new(),
            last: [(0, 0, None); 2],
            doubts: Vec::new(),
            span: None,
        }
    }

    fn get(
        &mut self,
        address: u64,
        rank: u64,
        field: EntryField,
        problems: &mut Vec<EntryProblem>,
    ) -> Option<NameId> {
        let slot = usize::from(field == EntryField::ExecutableName);
        let (from, last_address, last_id) = self.last.get(slot).copied().unwrap_or_default();
        if address == last_address && last_id.is_some() {
            // The common case: the same string as the previous entry.
            self.doubt(last_id, address, rank, field, problems);
            return last_id;
        }
        let kind = if address == 0 {
            ProblemKind::NullPointer
        } else {
            match gallop(self.addresses, from, address) {
                Some(i) => match self.id_at(i) {
                    Ok(id) => {
                        if let Some(last) = self.last.get_mut(slot) {
                            *last = (i, address, Some(id));
                        }
                        self.doubt(Some(id), address, rank, field, problems);
                        return Some(id);
                    }
                    Err(reason) => ProblemKind::Unreadable { address, reason },
                },
                None => ProblemKind::Unreadable {
                    address,
                    reason: "not fetched".into(),
                },
            }
        };
        problems.push(EntryProblem { rank, field, kind });
        None
    }

    /// Lists a problem for `rank` when the name `id` (at `address`) is not plausible.
    fn doubt(
        &self,
        id: Option<NameId>,
        address: u64,
        rank: u64,
        field: EntryField,
        problems: &mut Vec<EntryProblem>,
    ) {
        let in_table = self
            .span
            .is_some_and(|(start, len)| address >= start && address - start < len);
        let reason = if in_table {
            Some(Implausible::PointsIntoTable)
        } else {
            id.and_then(|id| self.doubts.get(id.index()).copied().flatten())
        };
        if let Some(reason) = reason {
            problems.push(EntryProblem {
                rank,
                field,
                kind: ProblemKind::Implausible { address, reason },
            });
        }
    }

    /// The id of the string at `addresses[i]`, decoding and interning it on first use.
    fn id_at(&mut self, i: usize) -> std::result::Result<NameId, String> {
        if let Some(Some(id)) = self.decoded.get(i) {
            return Ok(*id);
        }
        match (self.strings.fetched(i), self.decoded.get_mut(i)) {
            (Some(Ok(bytes)), Some(cell)) => {
                let names = &mut self.names;
                let id = match self.by_content.entry(bytes) {
                    std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        // At most one name per fetched string: fewer than u32::MAX.
                        let id = NameId::new(names.len()).ok_or("too many names")?;
                        names.push(String::from_utf8_lossy(bytes).into());
                        self.doubts.push(implausible(bytes));
                        *e.insert(id)
                    }
                };
                *cell = Some(id);
                Ok(id)
            }
            (Some(Err(reason)), _) => Err(reason),
            _ => Err("not fetched".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpir::{Rank, string_addresses};

    #[test]
    fn gallop_finds_anything_from_anywhere() {
        let v: Vec<u64> = (0..100).map(|i| i * 3).collect();
        for from in [0, 1, 50, 98, 99, 500] {
            for (i, &x) in v.iter().enumerate() {
                assert_eq!(gallop(&v, from, x), Some(i), "from {from} to {x}");
            }
            assert_eq!(gallop(&v, from, 1), None);
            assert_eq!(gallop(&v, from, 1000), None);
        }
        assert_eq!(gallop(&[], 0, 5), None);
    }

    #[test]
    fn resolve_shares_strings_and_lists_problems() {
        let raw = [
            RawProcDesc {
                host_name: 0x10,
                executable_name: 0x20,
                pid: 100,
            },
            RawProcDesc {
                host_name: 0x10,
                executable_name: 0,
                pid: 0,
            },
            RawProcDesc {
                host_name: 0x30,
                executable_name: 0x20,
                pid: 7,
            },
        ];
        let addresses = string_addresses(&raw);
        assert_eq!(addresses, vec![0x10, 0x20, 0x30]);
        let strings = [
            Ok(&b"node1"[..]),
            Ok(&b"/bin/a\xff"[..]),
            Err("unmapped".to_string()),
        ];
        let t = resolve(&raw, &addresses, &strings);
        assert_eq!(t.len(), 3);
        let r: Vec<Rank<'_>> = t.ranks().collect();
        assert_eq!(r[0].host, Some("node1"));
        assert_eq!(r[0].executable, Some("/bin/a\u{fffd}"));
        assert_eq!(r[1].executable, None);
        assert_eq!(r[2].host, None);
        assert_eq!(t.names.len(), 2, "one name per distinct readable string");
        let problems: Vec<String> = t.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            problems,
            [
                "rank 0: executable_name: the string at 0x20 is not valid UTF-8; kept, not trusted",
                "rank 1: executable_name: NULL pointer",
                "rank 1: pid: invalid pid 0",
                "rank 2: host_name: unreadable string at 0x30: unmapped",
                "rank 2: executable_name: the string at 0x20 is not valid UTF-8; kept, not trusted",
            ]
        );
    }

    #[test]
    fn implausible_names_are_kept_and_flagged_per_rank() {
        let raw = [
            RawProcDesc {
                host_name: 0x1008, // inside the table below
                executable_name: 0x20,
                pid: 10,
            },
            RawProcDesc {
                host_name: 0x30,
                executable_name: 0x40,
                pid: 11,
            },
        ];
        let addresses = string_addresses(&raw);
        assert_eq!(addresses, vec![0x20, 0x30, 0x40, 0x1008]);
        let strings: [std::result::Result<&[u8], String>; 4] = [
            Ok(&b"/bin/a"[..]),
            Ok(&b"no\x07de"[..]),
            Ok(&b""[..]),
            Ok(&b"\x10\x20"[..]),
        ];
        let t = resolve_in(&raw, &addresses, &strings, Some((0x1000, 48)));
        let r: Vec<Rank<'_>> = t.ranks().collect();
        assert_eq!(r[1].host, Some("no\u{7}de"), "kept as read");
        let kinds: Vec<(u64, EntryField, Implausible)> = t
            .problems
            .iter()
            .filter_map(|p| match p.kind {
                ProblemKind::Implausible { reason, .. } => Some((p.rank, p.field, reason)),
                _ => None,
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (0, EntryField::HostName, Implausible::PointsIntoTable),
                (1, EntryField::HostName, Implausible::ControlBytes),
                (1, EntryField::ExecutableName, Implausible::Empty),
            ]
        );
        // Without the table's span, the pointer into it goes unnoticed but its bytes do not.
        let t = resolve(&raw, &addresses, &strings);
        assert!(t.problems.iter().any(|p| p.rank == 0
            && matches!(
                p.kind,
                ProblemKind::Implausible {
                    reason: Implausible::ControlBytes,
                    ..
                }
            )));
    }
}
