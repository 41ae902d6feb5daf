//! Pairing available messages with posted receives, within one (communicator, destination)
//! bucket.

use std::collections::{HashMap, VecDeque};

fn tag_matches(want: Option<i64>, have: Option<i64>) -> bool {
    match (want, have) {
        (None, _) | (_, None) => true,
        (Some(w), Some(h)) => w == h,
    }
}

/// A message available to receives at one rank on one communicator.
#[derive(Debug, Clone, Copy)]
pub(super) struct Msg {
    /// The pending send it is, or `None` for an unexpected message.
    pub(super) send: Option<usize>,
    /// Source (local rank) and tag; `None` matches anything (an unreadable value).
    pub(super) src: Option<u64>,
    pub(super) tag: Option<i64>,
}

#[derive(Debug, Default)]
pub(super) struct Bucket {
    pub(super) recvs: Vec<(usize, Option<u64>, Option<i64>)>,
    pub(super) unexpected: Vec<Msg>,
    pub(super) sends: Vec<Msg>,
}

/// Greedy pairing within one (communicator, destination) bucket: most specific receives first,
/// each taking the first unused message that matches (unexpected messages before sends).
/// Linear: every message sits in four queues and is popped from each at most once.
pub(super) fn pair_bucket(mut b: Bucket, satisfied: &mut [bool]) {
    if b.recvs.is_empty() {
        return;
    }
    let msgs: Vec<Msg> = b.unexpected.drain(..).chain(b.sends.drain(..)).collect();
    let mut used = vec![false; msgs.len()];
    let mut by_src_tag: HashMap<(u64, i64), VecDeque<usize>> = HashMap::new();
    let mut by_src: HashMap<u64, VecDeque<usize>> = HashMap::new();
    let mut by_tag: HashMap<i64, VecDeque<usize>> = HashMap::new();
    let mut all = VecDeque::new();
    let mut wild = VecDeque::new();
    for (i, m) in msgs.iter().enumerate() {
        match (m.src, m.tag) {
            (Some(s), Some(t)) => {
                by_src_tag.entry((s, t)).or_default().push_back(i);
                by_src.entry(s).or_default().push_back(i);
                by_tag.entry(t).or_default().push_back(i);
                all.push_back(i);
            }
            _ => wild.push_back(i),
        }
    }
    let take = |q: Option<&mut VecDeque<usize>>, used: &[bool]| -> Option<usize> {
        let q = q?;
        while let Some(&i) = q.front() {
            if used.get(i).copied().unwrap_or(true) {
                q.pop_front();
            } else {
                return Some(i);
            }
        }
        None
    };
    b.recvs
        .sort_by_key(|&(id, src, tag)| (src.is_none(), tag.is_none(), id));
    for (id, src, tag) in b.recvs {
        let found = match (src, tag) {
            (Some(s), Some(t)) => take(by_src_tag.get_mut(&(s, t)), &used),
            (Some(s), None) => take(by_src.get_mut(&s), &used),
            (None, Some(t)) => take(by_tag.get_mut(&t), &used),
            (None, None) => take(Some(&mut all), &used),
        }
        .or_else(|| take(Some(&mut wild), &used));
        let Some(i) = found else { continue };
        if let Some(u) = used.get_mut(i) {
            *u = true;
        }
        if let Some(s) = satisfied.get_mut(id) {
            *s = true;
        }
        if let Some(send) = msgs.get(i).and_then(|m| m.send)
            && let Some(s) = satisfied.get_mut(send)
        {
            *s = true;
        }
        debug_assert!(
            msgs.get(i)
                .is_some_and(|m| src.is_none() || m.src.is_none() || m.src == src)
                && msgs.get(i).is_some_and(|m| tag_matches(tag, m.tag))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_pairing_consumes_each_message_once() {
        let msg = |src, tag| Msg {
            send: None,
            src: Some(src),
            tag: Some(tag),
        };
        // Two receives from 1 tag 5, one message: one receive stays unsatisfied. An
        // ANY_SOURCE/ANY_TAG receive takes the remaining message from 2.
        let b = Bucket {
            recvs: vec![
                (0, Some(1), Some(5)),
                (1, Some(1), Some(5)),
                (2, None, None),
            ],
            unexpected: vec![msg(1, 5), msg(2, 9)],
            sends: vec![],
        };
        let mut sat = vec![false; 3];
        pair_bucket(b, &mut sat);
        assert_eq!(sat, [true, false, true]);
    }
}
