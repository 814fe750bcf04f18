//! DriverGetInfo: the driver's name and protocols.

use cosi_driver::proto::DriverGetInfoRequest;

use crate::checks::{self, known_protocols};
use crate::context::{Ctx, OrFail, Step, fail};

use super::{answered, same_name};

pub(super) async fn name_is_a_domain_name(ctx: &mut Ctx) -> Step {
    cosi_driver::validate::driver_name(&ctx.driver.info.name).or_fail("")
}

pub(super) async fn advertises_protocols(ctx: &mut Ctx) -> Step {
    checks::advertised_protocols(&ctx.driver.info.supported_protocols).or_fail("")
}

pub(super) async fn answers_the_same(ctx: &mut Ctx) -> Step {
    let again = ctx
        .send(DriverGetInfoRequest {})
        .await
        .map_err(answered("a second DriverGetInfo"))?;
    same_name(&ctx.driver.info.name, &again.name)?;
    let (mut before, mut after) = (
        known_protocols(&ctx.driver.info.supported_protocols),
        known_protocols(&again.supported_protocols),
    );
    before.sort();
    after.sort();
    if before != after {
        fail!("the supported protocols changed between calls, from {before:?} to {after:?}");
    }
    Ok(())
}
