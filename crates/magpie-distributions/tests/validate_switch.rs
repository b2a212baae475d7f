//! `set_default_validate_args(false)`: no parameter or support checks. Its own test binary,
//! since the switch is process-wide (as PyTorch's) and other tests expect validation.

use magpie_core::Tensor;
use magpie_distributions::*;

#[test]
fn validation_can_be_switched_off() {
    assert!(default_validate_args());
    set_default_validate_args(false);
    let d = Normal::new(&Tensor::scalar(0.0f64), &Tensor::scalar(-1.0f64));
    let lp = Exponential::new(&Tensor::scalar(1.0f64)).unwrap().log_prob(&Tensor::scalar(-1.0f64));
    set_default_validate_args(true);
    assert!(d.is_ok());
    // rate * exp(-rate x) at x = -1 without the support check: log 1 + 1
    assert_eq!(lp.unwrap().to_f64_vec().unwrap(), vec![1.0]);
    assert!(Normal::new(&Tensor::scalar(0.0f64), &Tensor::scalar(-1.0f64)).is_err());
}

#[test]
fn validate_args_scope_is_per_instance() {
    let d = {
        let _v = validate_args(false);
        Exponential::new(&Tensor::scalar(-2.0f64)).unwrap()
    };
    // the instance keeps validate_args=false: its log_prob does not check the support either
    assert!(d.log_prob(&Tensor::scalar(-1.0f64)).is_ok());
    let checked = {
        let _v = validate_args(true);
        Exponential::new(&Tensor::scalar(2.0f64)).unwrap()
    };
    assert!(checked.log_prob(&Tensor::scalar(-1.0f64)).is_err());
}
