//! Errors inside a result, on the wire: written as their whole chain of text, read back as
//! [`MqdError::Relayed`] / [`NativeError::Relayed`] (the receiver shows what the reader saw;
//! it cannot act on the error's variant, which names another node's files and addresses).

use std::error::Error;

use crate::error::MqdError;
use crate::error::native::NativeError;

/// An error and its causes, one line (`a: b: c`).
pub(crate) fn chain_text(e: &dyn Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    // Bounded: a chain is short, but nothing here trusts that.
    for _ in 0..32 {
        let Some(s) = source else { break };
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

pub(crate) mod mqd {
    use super::*;

    pub(crate) fn serialize<S: serde::Serializer>(e: &MqdError, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&chain_text(e))
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<MqdError, D::Error> {
        let message = <String as serde::Deserialize>::deserialize(d)?;
        Ok(MqdError::Relayed { message })
    }
}

pub(crate) mod native {
    use super::*;

    pub(crate) fn serialize<S: serde::Serializer>(
        e: &NativeError,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(&chain_text(e))
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<NativeError, D::Error> {
        let message = <String as serde::Deserialize>::deserialize(d)?;
        Ok(NativeError::Relayed { message })
    }
}

#[cfg(test)]
mod tests {
    use crate::MqdError;
    use crate::model::{CommunicatorQueues, Queue, RankQueues, ReadNote};
    use crate::native::NativeError;
    use mpir_types::mqd::Communicator;

    #[test]
    fn a_result_crosses_the_wire_with_its_errors_as_text() {
        let mut comm = CommunicatorQueues::new(Communicator {
            unique_id: 7,
            local_rank: 1,
            size: 4,
            name: "MPI_COMM_WORLD".into(),
        });
        comm.context_id = Some(0x44);
        comm.group = Some(vec![Some(0), None, Some(2), Some(3)]);
        comm.unexpected = Queue::Failed {
            partial: Vec::new(),
            error: MqdError::NoEngine {
                native: NativeError::Relayed {
                    message: "inner".into(),
                },
                dll: Box::new(MqdError::NoDll {
                    reason: "none named".into(),
                }),
            },
        };
        let rank = RankQueues::new(
            vec![comm],
            vec![ReadNote::NotRead {
                what: "type x (y)".into(),
            }],
        );
        let json = serde_json::to_string(&rank).unwrap();
        let back: RankQueues = serde_json::from_str(&json).unwrap();
        assert_eq!(back.communicators.len(), 1);
        let c = &back.communicators[0];
        assert_eq!(c.communicator.name, "MPI_COMM_WORLD");
        assert_eq!(c.context_id, Some(0x44));
        assert_eq!(
            c.group.as_deref(),
            Some(&[Some(0), None, Some(2), Some(3)][..])
        );
        assert_eq!(back.notes, rank.notes);
        // The error's variant stays on its node; its whole chain of text travels.
        let Queue::Failed { error, .. } = &c.unexpected else {
            panic!("{:?}", c.unexpected)
        };
        assert_eq!(
            error.to_string(),
            "no native walker fits (inner), and the MPI's message-queue DLL failed: \
             no MQD DLL found: none named"
        );
        assert!(matches!(error, MqdError::Relayed { .. }));
    }
}
