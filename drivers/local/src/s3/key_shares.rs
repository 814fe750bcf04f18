//! Connections per access key, so that one tenant cannot hold every
//! connection of the endpoint and keep the others waiting.
//!
//! A connection belongs to the key of its latest signed request, from the
//! moment the signature is verified (before any of the body is read) until
//! the connection closes or a request of another key takes it over; it
//! counts against that key whether a request is in flight or it is kept
//! alive between requests. Every key may hold `limit` connections.
//! Requests without a valid signature (anonymous, or failing their check)
//! share one more such allowance, taken after they are answered.
//!
//! Claiming a connection for a key before its body is read is what lets a
//! key over its allowance be answered at once (`SlowDown`) rather than
//! holding one more connection while its body trickles in. The key is the
//! one whose signature was verified, not one merely named in a request, so
//! a client that knows another tenant's access key ID but not its secret
//! cannot use up that tenant's allowance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Whose allowance a connection counts against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// The account whose key signed the connection's latest request (one
    /// key per account).
    Account(String),
    /// Clients whose requests carry no valid signature, together.
    Unauthenticated,
}

/// What claiming a connection for an owner does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The connection is the owner's already.
    Kept,
    /// The owner takes the connection (releasing it from any other).
    Taken,
    /// The owner holds `limit` connections: the claim is refused.
    Refused,
}

/// Decides a claim on a connection owned by `current` for `wanted`, who
/// holds `held` connections out of `limit`.
pub(crate) fn decide(current: Option<&Owner>, wanted: &Owner, held: usize, limit: usize) -> Claim {
    if current == Some(wanted) {
        Claim::Kept
    } else if held < limit {
        Claim::Taken
    } else {
        Claim::Refused
    }
}

/// The connections each owner holds, at most `limit` each.
#[derive(Debug)]
pub(crate) struct KeyShares {
    limit: usize,
    held: Mutex<HashMap<Owner, usize>>,
}

impl KeyShares {
    /// Allows each owner `limit` connections.
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            held: Mutex::default(),
        })
    }

    fn held(&self) -> MutexGuard<'_, HashMap<Owner, usize>> {
        // A count is updated in one statement: a panic elsewhere while the
        // lock was held leaves it consistent.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn release(&self, owner: &Owner) {
        let mut held = self.held();
        if let Some(n) = held.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                held.remove(owner);
            }
        }
    }
}

/// One connection counted against its owner until dropped.
#[derive(Debug)]
struct Share {
    owner: Owner,
    shares: Arc<KeyShares>,
}

impl Drop for Share {
    fn drop(&mut self) {
        self.shares.release(&self.owner);
    }
}

/// One connection of the endpoint and its owner, if it has one yet.
/// Dropping it (when the connection closes) releases the owner's share.
#[derive(Debug)]
pub(crate) struct Connection {
    shares: Arc<KeyShares>,
    share: Mutex<Option<Share>>,
}

/// A connection claimed for an owner that holds as many as it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// How many that is.
    pub(crate) limit: usize,
}

impl Connection {
    /// A new connection, owned by nobody yet.
    pub(crate) fn new(shares: Arc<KeyShares>) -> Self {
        Self {
            shares,
            share: Mutex::default(),
        }
    }

    fn share(&self) -> MutexGuard<'_, Option<Share>> {
        self.share.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when some owner holds the connection.
    pub(crate) fn is_owned(&self) -> bool {
        self.share().is_some()
    }

    /// Makes `owner` the connection's owner, unless it holds as many
    /// connections as it may already.
    pub(crate) fn claim(&self, owner: Owner) -> Result<(), Refused> {
        let mut current = self.share();
        let taken = {
            let mut held = self.shares.held();
            let count = held.get(&owner).copied().unwrap_or(0);
            match decide(
                current.as_ref().map(|s| &s.owner),
                &owner,
                count,
                self.shares.limit,
            ) {
                Claim::Kept => return Ok(()),
                Claim::Refused => {
                    return Err(Refused {
                        limit: self.shares.limit,
                    });
                }
                Claim::Taken => {
                    held.insert(owner.clone(), count + 1);
                    Share {
                        owner,
                        shares: Arc::clone(&self.shares),
                    }
                }
            }
        };
        // Replacing the old share releases it, once the count lock is free.
        *current = Some(taken);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(id: &str) -> Owner {
        Owner::Account(id.to_owned())
    }

    #[test]
    fn claims_are_decided_by_the_current_owner_and_the_wanted_ones_count() {
        let (a, b) = (account("a"), account("b"));
        for (current, wanted, held, want) in [
            (None, &a, 0, Claim::Taken),
            (None, &a, 1, Claim::Taken),
            (None, &a, 2, Claim::Refused),
            (Some(&a), &a, 2, Claim::Kept),
            (Some(&b), &a, 1, Claim::Taken),
            (Some(&b), &a, 2, Claim::Refused),
            (None, &Owner::Unauthenticated, 2, Claim::Refused),
        ] {
            assert_eq!(
                decide(current, wanted, held, 2),
                want,
                "{current:?} {wanted:?} {held}"
            );
        }
    }

    fn count(shares: &KeyShares, owner: &Owner) -> usize {
        shares.held().get(owner).copied().unwrap_or(0)
    }

    #[test]
    fn a_key_holds_at_most_its_limit_of_connections_until_one_closes() {
        let shares = KeyShares::new(2);
        let a = account("a");
        let conns: Vec<Connection> = (0..3)
            .map(|_| Connection::new(Arc::clone(&shares)))
            .collect();
        conns[0].claim(a.clone()).unwrap();
        conns[1].claim(a.clone()).unwrap();
        // Claiming one's own connection again costs nothing.
        conns[1].claim(a.clone()).unwrap();
        assert_eq!(conns[2].claim(a.clone()), Err(Refused { limit: 2 }));
        assert!(!conns[2].is_owned());
        // Another key is not affected.
        conns[2].claim(account("b")).unwrap();
        let mut conns = conns;
        drop(conns.remove(0));
        assert_eq!(count(&shares, &a), 1);
        conns[1].claim(a.clone()).unwrap();
        assert_eq!(count(&shares, &a), 2);
        assert_eq!(count(&shares, &account("b")), 0, "released when taken over");
        drop(conns);
        assert!(shares.held().is_empty());
    }
}
