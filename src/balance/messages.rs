//! The protocol's messages between locales, as remote calls of the
//! crate's own. Requests, "nothing" and the start are declared inline:
//! they run inside the poll that receives them, so a locale whose
//! workers are all busy in long pieces still sees a request at its next
//! poll (a piece's loop polls between steps). Work and acknowledgments
//! run as tasks (a piece runs in the task that received it).

use super::computation::{self, CompId};
use super::protocol::Tuning;
use super::stats::LocaleStats;
use crate::remote::Remote;
use serde::{Deserialize, Serialize};

/// What every message carries: which computation, of which work type
/// (so a locale that hears of it first can take part), and its tuning.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) comp: CompId,
    pub(crate) kind: u64,
    pub(crate) tuning: Tuning,
}

/// The computation `header` names here, or a panic that says why not
/// (a message for a work type this binary does not have).
fn find(header: &Header) -> Option<std::sync::Arc<dyn computation::Computation>> {
    match computation::find(header) {
        Ok(c) => c,
        Err(e) => panic!("cantus: balance: {e}"),
    }
}

/// The root tells every locale that a computation began.
#[derive(Serialize, Deserialize)]
pub(crate) struct Start {
    pub(crate) header: Header,
}

impl Remote for Start {
    type Output = ();
    const INLINE: bool = true;
    fn run(self) {
        // Making it is starting it (it asks for work).
        let _ = find(&self.header);
    }
}

/// A thief asks a victim for work.
#[derive(Serialize, Deserialize)]
pub(crate) struct Steal {
    pub(crate) header: Header,
    pub(crate) thief: u32,
    pub(crate) lifeline: bool,
}

impl Remote for Steal {
    type Output = ();
    const INLINE: bool = true;
    fn run(self) {
        if let Some(c) = find(&self.header) {
            c.on_steal(self.thief as usize, self.lifeline);
        }
    }
}

/// A victim has nothing for a random request.
#[derive(Serialize, Deserialize)]
pub(crate) struct Nothing {
    pub(crate) header: Header,
    pub(crate) victim: u32,
}

impl Remote for Nothing {
    type Output = ();
    const INLINE: bool = true;
    fn run(self) {
        if let Some(c) = find(&self.header) {
            c.on_nothing(self.victim as usize);
        }
    }
}

/// A piece of work, encoded.
#[derive(Serialize, Deserialize)]
pub(crate) struct Work {
    pub(crate) header: Header,
    pub(crate) from: u32,
    pub(crate) lifeline: bool,
    pub(crate) piece: Bytes,
}

impl Remote for Work {
    type Output = ();
    fn run(self) {
        // Work is never sent for a computation that ended (termination
        // waits for its acknowledgment), so `find` finds it.
        let c = find(&self.header).unwrap_or_else(|| {
            panic!(
                "cantus: balance: work arrived for {:?}, which ended here",
                self.header.comp
            )
        });
        c.on_work(self.from as usize, self.lifeline, &self.piece.0);
    }
}

/// The acknowledgment of a piece, with the child's result if it leaves
/// the tree (and what failed in its subtree, if something did: a failure
/// travels up the tree as results do, so it reaches the root before the
/// end).
#[derive(Serialize, Deserialize)]
pub(crate) struct Ack {
    pub(crate) header: Header,
    pub(crate) result: Option<Bytes>,
    pub(crate) failure: Option<String>,
}

impl Remote for Ack {
    type Output = ();
    fn run(self) {
        let c = find(&self.header).unwrap_or_else(|| {
            panic!(
                "cantus: balance: an acknowledgment arrived for {:?}, which ended here",
                self.header.comp
            )
        });
        c.on_ack(self.result.as_ref().map(|b| b.0.as_slice()), self.failure);
    }
}

/// The root ends the computation on a locale and takes its counts.
#[derive(Serialize, Deserialize)]
pub(crate) struct Finish {
    pub(crate) header: Header,
}

impl Remote for Finish {
    type Output = LocaleStats;
    const INLINE: bool = true;
    fn run(self) -> LocaleStats {
        computation::end(self.header.comp)
            .map(|c| c.finish())
            .unwrap_or_default()
    }
}

crate::remote!(Start, Steal, Nothing, Work, Ack, Finish);

/// An encoded piece or result: serde's byte string (one length and the
/// bytes), not its sequence of `u8` (one call per byte, which cost a
/// blocked LU's pieces of megabytes more than their arithmetic).
pub(crate) struct Bytes(pub(crate) Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(b.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, b: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(b))
            }
        }
        d.deserialize_byte_buf(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_travel_as_one_byte_string() {
        let b = Bytes((0..=255u8).collect());
        let enc = crate::remote::encode::encode_to_vec(&b).unwrap();
        // A varint length (256: two bytes), then the bytes as they are.
        assert_eq!(enc.len(), 2 + 256);
        assert_eq!(&enc[2..], &b.0[..]);
        let back: Bytes = crate::remote::codec::from_bytes(&enc).unwrap();
        assert_eq!(back.0, b.0);
        let none: Option<Bytes> = crate::remote::codec::from_bytes(
            &crate::remote::encode::encode_to_vec(&None::<Bytes>).unwrap(),
        )
        .unwrap();
        assert!(none.is_none());
    }
}
