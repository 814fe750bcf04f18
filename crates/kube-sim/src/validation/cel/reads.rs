//! Which fields of `self` and `oldSelf` a CEL rule reads, found in its
//! syntax tree. A rule that only selects direct fields (`self.id`,
//! `has(oldSelf.id)`, `self.ref.uid`) can be handed a `self` holding just
//! those fields and give the same result; one that uses either value in
//! any other way (whole, indexed, iterated, passed to a function, as a
//! macro's target) cannot, and gets `None`.

use std::collections::BTreeSet;

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{EntryExpr, Expr};

/// The direct fields of `self` and `oldSelf` that `expr` reads (as CEL
/// names), or `None` when it needs either value whole.
pub fn fields_read(expr: &IdedExpr) -> Option<BTreeSet<String>> {
    let mut fields = BTreeSet::new();
    collect(expr, &mut fields).then_some(fields)
}

fn is_self(name: &str) -> bool {
    matches!(name, "self" | "oldSelf")
}

/// Adds what `e` reads to `out`; false when `e` needs a value whole.
fn collect(e: &IdedExpr, out: &mut BTreeSet<String>) -> bool {
    match &e.expr {
        Expr::Ident(name) => !is_self(name),
        Expr::Select(s) => match &s.operand.expr {
            Expr::Ident(name) if is_self(name) => {
                out.insert(s.field.clone());
                true
            }
            _ => collect(&s.operand, out),
        },
        Expr::Literal(_) => true,
        Expr::Call(c) => {
            c.target.as_deref().is_none_or(|t| collect(t, out))
                && c.args.iter().all(|a| collect(a, out))
        }
        Expr::List(l) => l.elements.iter().all(|x| collect(x, out)),
        Expr::Map(m) => m.entries.iter().all(|x| entry(&x.expr, out)),
        Expr::Struct(s) => s.entries.iter().all(|x| entry(&x.expr, out)),
        Expr::Comprehension(c) => {
            // A macro variable named like the rule's values would hide them.
            let declared = [Some(&c.iter_var), c.iter_var2.as_ref(), Some(&c.accu_var)];
            !declared.into_iter().flatten().any(|v| is_self(v))
                && [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ]
                .into_iter()
                .all(|x| collect(x, out))
        }
        Expr::Unspecified => false,
    }
}

fn entry(e: &EntryExpr, out: &mut BTreeSet<String>) -> bool {
    match e {
        EntryExpr::StructField(f) => collect(&f.value, out),
        EntryExpr::MapEntry(m) => collect(&m.key, out) && collect(&m.value, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_cel::cel::Program;

    fn reads(rule: &str) -> Option<Vec<String>> {
        let program = Program::compile(rule).unwrap();
        fields_read(program.expression()).map(|f| f.into_iter().collect())
    }

    #[test]
    fn direct_field_selections_are_listed() {
        assert_eq!(
            reads(
                "!has(oldSelf.bucketID) || (has(self.bucketID) && self.bucketID == oldSelf.bucketID)"
            ),
            Some(vec!["bucketID".to_owned()])
        );
        assert_eq!(
            reads("self.ref.uid == oldSelf.ref.uid && self.n < 10"),
            Some(vec!["n".to_owned(), "ref".to_owned()])
        );
        assert_eq!(
            reads(
                "self.tags.all(t, t != 'bad') && [self.a].size() == 1 && {'k': self.b}.size() == 1"
            ),
            Some(vec!["a".to_owned(), "b".to_owned(), "tags".to_owned()])
        );
        assert_eq!(reads("1 == 1"), Some(vec![]));
    }

    #[test]
    fn any_other_use_of_self_or_old_self_needs_the_whole_value() {
        for rule in [
            "self == oldSelf",
            "size(self) < 3",
            "self.all(k, k != 'x')",
            "self['a'] == 'b'",
            "has(self.a) && self.size() > 1",
            "oldSelf.hasValue()",
            "self.a.exists(self, self == 'x')",
            "[1].all(oldSelf, oldSelf > 0) && self.a == 1",
        ] {
            assert_eq!(reads(rule), None, "{rule}");
        }
    }
}
