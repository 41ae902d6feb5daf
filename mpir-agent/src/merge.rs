//! Putting agents' answers together: into the session's results at the front end, and into
//! one answer at a parent agent (its own ranks, then its subtree's). The answers of an agent
//! are checked first: it may answer only for the ranks it was given.

use std::time::Duration;

use mpir_session::{
    AgentFailure, RankError, RankRead, RemoteSample, StopTime, Unreadable, WaitsReadError,
};
use mpir_types::stacks::Unreached;
use mpir_types::unread::{NotRead, ReasonCode};

use crate::error::ProtocolError;
use crate::fleet::{Down, Member};
use crate::protocol::{Problem, ProblemKind, RankQueuesOut, Reply, SampleOut, WaitsOut};

/// One member's queue answer, checked: its ranks, or why there are none.
pub(crate) fn queue_outcome(
    reply: Result<Reply, Down>,
    m: &mut Member,
) -> Result<Vec<RankQueuesOut>, Down> {
    let outcome = match reply {
        Ok(Reply::Queues { engine, ranks, .. }) => {
            let mine = m.rank_set();
            match ranks.iter().find(|r| !mine.contains(&r.rank)) {
                Some(r) => Err(Down::new(
                    AgentFailure::BadAnswer,
                    ProtocolError::ForeignRank { rank: r.rank }.to_string(),
                )),
                None => {
                    m.engine = engine;
                    Ok(ranks)
                }
            }
        }
        Ok(Reply::Failed { error }) => Err(Down::new(AgentFailure::ReadFailed, error)),
        Ok(_) => Err(Down::new(
            AgentFailure::BadAnswer,
            "a reply of another kind to a queues request",
        )),
        Err(d) => Err(d),
    };
    if let Err(d) = &outcome
        && d.failure == AgentFailure::BadAnswer
    {
        m.down(d.clone());
    }
    outcome
}

/// One member's stacks answer, checked: its samples, or why there are none.
pub(crate) fn stacks_outcome(
    reply: Result<Reply, Down>,
    m: &mut Member,
) -> Result<Vec<SampleOut>, Down> {
    let outcome = match reply {
        Ok(Reply::Stacks { samples }) => {
            let mine = m.rank_set();
            let foreign = samples.iter().find_map(|s| {
                s.ranks
                    .iter()
                    .map(|r| r.rank)
                    .chain(s.unreached.iter().map(|u| u.rank))
                    .find(|r| !mine.contains(r))
            });
            match foreign {
                Some(rank) => Err(Down::new(
                    AgentFailure::BadAnswer,
                    ProtocolError::ForeignRank { rank }.to_string(),
                )),
                None => Ok(samples),
            }
        }
        Ok(Reply::Failed { error }) => Err(Down::new(AgentFailure::ReadFailed, error)),
        Ok(_) => Err(Down::new(
            AgentFailure::BadAnswer,
            "a reply of another kind to a stacks request",
        )),
        Err(d) => Err(d),
    };
    if let Err(d) = &outcome
        && d.failure == AgentFailure::BadAnswer
    {
        m.down(d.clone());
    }
    outcome
}

/// Puts one member's queue outcome into a read's ranks (front end): each of its ranks read,
/// or why not, naming the rank's node.
pub(crate) fn queues(
    ranks: &mut [RankRead],
    m: &Member,
    outcome: Result<Vec<RankQueuesOut>, Down>,
) {
    let host_of = |rank: u64| {
        m.ranks
            .iter()
            .find(|c| c.rank == rank)
            .map_or_else(|| m.host.clone(), |c| c.host.clone())
    };
    match outcome {
        Ok(answered) => {
            for out in answered {
                let Some(r) = ranks.iter_mut().find(|r| r.rank == Some(out.rank)) else {
                    continue;
                };
                let host = host_of(out.rank);
                r.stacks = out.stacks;
                r.waits = out.waits.map(|w| match w {
                    WaitsOut::Read(w) => Ok(*w),
                    WaitsOut::Problem(why) => Err(WaitsReadError::Agent {
                        host: host.clone(),
                        why,
                    }),
                });
                r.queues = match (out.queues, out.problem) {
                    (Some(q), _) => Ok(q),
                    (None, Some(p)) => Err(rank_error(host, p)),
                    (None, None) => Err(agent_error(
                        host,
                        AgentFailure::BadAnswer,
                        "no queues and no reason".into(),
                    )),
                };
            }
        }
        Err(d) => {
            for claim in &m.ranks {
                let Some(r) = ranks.iter_mut().find(|r| r.rank == Some(claim.rank)) else {
                    continue;
                };
                let (host, detail) = m.reason_for(claim, &d);
                r.queues = Err(agent_error(host, d.failure, detail));
                r.stacks = None;
                r.waits = None;
            }
        }
    }
}

/// One member's stacks outcome as the front end merges it: one part per sample (`samples`
/// of them when the agent failed, each rank unreached with the reason).
pub(crate) fn stacks_part(
    reply: Result<Reply, Down>,
    m: &mut Member,
    samples: usize,
) -> Vec<RemoteSample> {
    match stacks_outcome(reply, m) {
        Ok(answered) => answered
            .into_iter()
            .map(|s| {
                let stops = s
                    .stops
                    .iter()
                    .map(|t| StopTime::new(t.rank, t.pid, Duration::from_micros(t.stopped_us)))
                    .collect();
                RemoteSample::new(s.ranks, s.unreached).with_stops(stops, s.overran)
            })
            .collect(),
        Err(d) => {
            let unreached = unreached_for(m, &d);
            (0..samples)
                .map(|_| RemoteSample::new(Vec::new(), unreached.clone()))
                .collect()
        }
    }
}

/// Every rank of `m`, unreached for `d`, naming each rank's node.
pub(crate) fn unreached_for(m: &Member, d: &Down) -> Vec<Unreached> {
    m.ranks
        .iter()
        .map(|c| {
            let (host, detail) = m.reason_for(c, d);
            let why = Unreadable::Agent {
                host,
                failure: d.failure,
                detail,
                denial: None,
                why: None,
            };
            Unreached::new(c.rank, why.not_read())
        })
        .collect()
}

/// A member's queue outcome as a parent agent passes it up: its ranks' answers, or each of
/// its ranks with the member's failure.
pub(crate) fn wire_queues(
    m: &Member,
    outcome: Result<Vec<RankQueuesOut>, Down>,
) -> Vec<RankQueuesOut> {
    match outcome {
        Ok(ranks) => ranks,
        Err(d) => m
            .ranks
            .iter()
            .map(|c| {
                // The front end names the rank's node itself.
                let (_, detail) = m.reason_for(c, &d);
                RankQueuesOut {
                    rank: c.rank,
                    pid: u32::try_from(c.pid).unwrap_or(0),
                    queues: None,
                    problem: Some(Problem::agent(d.failure.into(), detail)),
                    stacks: None,
                    waits: None,
                }
            })
            .collect(),
    }
}

/// Adds a member's stacks outcome to a parent agent's samples.
pub(crate) fn wire_stacks(
    samples: &mut [SampleOut],
    m: &Member,
    outcome: Result<Vec<SampleOut>, Down>,
) {
    match outcome {
        Ok(answered) => {
            for (mine, theirs) in samples.iter_mut().zip(answered) {
                mine.ranks.extend(theirs.ranks);
                mine.unreached.extend(theirs.unreached);
                mine.stops.extend(theirs.stops);
                mine.overran.extend(theirs.overran);
            }
        }
        Err(d) => {
            let unreached = unreached_for(m, &d);
            for s in samples.iter_mut() {
                s.unreached.extend(unreached.iter().cloned());
            }
        }
    }
}

/// How a rank an agent on `host` answered for but did not read stands at the front end: its
/// reason as the agent made it, carried as is (only an older agent's words alone are turned
/// into a reason).
pub(crate) fn rank_error(host: String, p: Problem) -> RankError {
    match p.kind {
        // Held there, not read (no reader, or the read failed).
        ProblemKind::ReadFailed => RankError::Elsewhere {
            why: p
                .why
                .unwrap_or_else(|| NotRead::new(ReasonCode::ReadFailed, p.message)),
            host,
        },
        ProblemKind::Remote | ProblemKind::Refused => RankError::Unreadable(Unreadable::Agent {
            host,
            failure: AgentFailure::Refused,
            detail: p.message,
            denial: p.denial,
            why: p.why.map(Box::new),
        }),
        ProblemKind::NotStopped => RankError::Unreadable(Unreadable::Agent {
            host,
            failure: AgentFailure::ReadFailed,
            detail: p.message,
            denial: p.denial,
            why: p.why.map(Box::new),
        }),
        ProblemKind::Agent => agent_error(
            host,
            p.failure.map_or(AgentFailure::BadAnswer, Into::into),
            p.message,
        ),
    }
}

/// A rank whose agent on `host` failed (`failure`, `detail`): nothing of it was read.
fn agent_error(host: String, failure: AgentFailure, detail: String) -> RankError {
    RankError::Unreadable(Unreadable::Agent {
        host,
        failure,
        detail,
        denial: None,
        why: None,
    })
}
