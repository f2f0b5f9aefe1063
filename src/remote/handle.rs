//! A remote call's handle ([`RemoteHandle`]): the result to come, how
//! `join` waits for it (polling, then blocking on the reply slot), and
//! the error of a call that failed on the other side.

use super::*;

/// A remote call's result, to come: [`join`](RemoteHandle::join) waits
/// for it (blocking only the calling task).
#[must_use = "a remote call's handle must be joined (or use begin_on)"]
pub struct RemoteHandle<T> {
    pub(super) inner: Pending<T>,
    pub(super) locale: usize,
    pub(super) name: &'static str,
    /// How the result travels: the codec for `Remote` calls, plain bytes
    /// for `RemotePod` calls.
    pub(super) decode: fn(&[u8]) -> Result<T, String>,
}

pub(super) enum Pending<T> {
    /// Running as a task of this locale.
    Local(Arc<SyncVar<Result<T, Error>>>),
    /// Sent; the reply will fill the slot of this ticket.
    Remote(Ticket, PhantomData<fn() -> T>),
    /// The request could not be sent.
    Failed(Error),
}

/// A call's claim on its reply slot (`replies.rs`); dropped unanswered,
/// it gives the slot up, and the poll that takes the reply frees it.
pub(super) struct Ticket {
    pub(super) engine: Arc<Engine>,
    pub(super) token: u64,
    /// The reply was taken and the slot freed: nothing to give up.
    pub(super) answered: bool,
}

impl Ticket {
    /// Waits for the reply of call `name` to `locale`, then reads it with
    /// `f` and frees the slot.
    fn take<R>(
        mut self,
        name: &'static str,
        locale: usize,
        f: impl FnOnce(Status, &[u8]) -> R,
    ) -> R {
        await_reply(&self.engine, self.token, name, locale);
        let r = self.engine.replies.take(self.token, f);
        self.answered = true;
        r
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self.engine.replies.abandon(self.token);
        }
    }
}

impl<T: Send + 'static> RemoteHandle<T> {
    /// Waits for the call to finish and returns its result; a panic in
    /// the call, or a locale that refused it, is an `Err` saying which
    /// call, where, and why.
    pub fn join(self) -> Result<T, Error> {
        let decode = self.decode;
        let (name, locale) = (self.name, self.locale);
        match self.inner {
            Pending::Local(slot) => {
                let _named = (!slot.is_full()).then(|| {
                    WaitPurpose::name(
                        slot.wait_addr(),
                        Purpose {
                            describe: |name, locale| {
                                format!(
                                    "waiting for remote call {name}, running here on locale \
                                     {locale}"
                                )
                            },
                            name,
                            n: locale,
                        },
                    )
                });
                slot.read_fe()
            }
            Pending::Failed(e) => Err(e),
            Pending::Remote(ticket, _) => ticket.take(name, locale, |status, payload| match status {
                Status::Done => decode(payload).map_err(|e| {
                    Error::new(
                        ErrorKind::Locale,
                        format!(
                            "cantus: the result of {name} from locale {locale} could not be decoded: {e}"
                        ),
                    )
                }),
                _ => Err(call_failed(name, locale, status, payload)),
            }),
        }
    }

    /// Whether the call has answered (or failed to go out), so that
    /// joining it would not wait.
    pub(crate) fn is_answered(&self) -> bool {
        match &self.inner {
            Pending::Local(slot) => slot.is_full(),
            Pending::Remote(ticket, _) => ticket.engine.replies.is_full(ticket.token),
            Pending::Failed(_) => true,
        }
    }

    /// Waits for the reply of a raw call ([`on_raw`]) and hands its
    /// payload, in place in the reply slot, to `read`; failures as
    /// [`join`](Self::join).
    pub(crate) fn join_with<R>(self, read: impl FnOnce(&[u8]) -> R) -> Result<R, Error> {
        let (name, locale) = (self.name, self.locale);
        match self.inner {
            Pending::Remote(ticket, _) => {
                ticket.take(name, locale, |status, payload| match status {
                    Status::Done => Ok(read(payload)),
                    _ => Err(call_failed(name, locale, status, payload)),
                })
            }
            Pending::Failed(e) => Err(e),
            Pending::Local(_) => unreachable!("raw calls are never run as local tasks"),
        }
    }
}

/// The error of call `name` to `locale` whose reply came with `status`
/// (not `Done`) and `payload` (the reason, UTF-8).
pub(super) fn call_failed(name: &str, locale: usize, status: Status, payload: &[u8]) -> Error {
    let text = String::from_utf8_lossy(payload);
    match status {
        Status::Panicked => Error::new(
            ErrorKind::RemotePanic,
            format!("cantus: remote call {name} panicked on locale {locale}: {text}"),
        ),
        Status::Rejected => Error::new(
            ErrorKind::RemoteRejected,
            format!("cantus: locale {locale} refused remote call {name}: {text}"),
        ),
        Status::Lost | Status::Done => Error::new(
            ErrorKind::Locale,
            format!("cantus: remote call {name} ran on locale {locale}, but {text}"),
        ),
    }
}

/// Polls while a reply is on its way, before blocking: a task that spins
/// keeps its worker from polling, so the waiter polls itself (Chant's
/// "the thread polls" policy, seed 004, section 4.2), under the driver's
/// poll token; a reply its own poll delivers is taken without any wake-up.
/// After `REPLY_POLLS` polls it blocks on the slot, and the workers' own
/// polling delivers the reply and wakes it.
pub(super) fn await_reply(e: &Engine, token: u64, name: &'static str, locale: usize) {
    const REPLY_POLLS: u32 = 4096;
    for _ in 0..REPLY_POLLS {
        if e.replies.is_full(token) {
            return;
        }
        // `ready` first: loads only, where a poll takes the poll token.
        // A reply this poll delivers to us is taken as soon as it returns:
        // it may stay where the transport lent it (`replies.rs`).
        if !e.ready() || super::replies::polling_for(token, || e.poll_now()) == 0 {
            e.pause();
        }
    }
    e.replies.wait(
        token,
        Some(Purpose {
            describe: |name, locale| {
                format!("waiting for the reply of remote call {name} from locale {locale}")
            },
            name,
            n: locale,
        }),
    );
}
