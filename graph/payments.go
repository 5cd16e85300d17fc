package graph

import (
	"context"
	"errors"
	"regexp"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem"
	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/order"
	"github.com/goovo/idem/ent/payment"
	"github.com/goovo/idem/internal/example/provider"
)

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// validateOrder applies the business rules of a new order. Their errors are
// final: the hook stores them and replays them to every retry of the key.
func validateOrder(o *ent.Order) error {
	if o.Amount <= 0 {
		return finalError("BAD_USER_INPUT", "amount must be positive (minor units)")
	}
	if !currencyCode.MatchString(o.Currency) {
		return finalError("BAD_USER_INPUT", "currency must be an ISO 4217 code such as EUR")
	}
	return nil
}

// pay charges the order of the claimed payment and marks it paid: the
// article's handle(), run once per key by the hook.
//
// Everything written here goes through the mutation's transaction
// (ent.FromContext), so it commits together with the stored result or not at
// all. The provider is outside that transaction: it gets the idempotency key,
// so that if this attempt crashes after charging, the attempt that takes the
// key over gets the same charge back instead of a second one.
func (r *Resolver) pay(ctx context.Context, p *ent.Payment) (*ent.Payment, error) {
	tenant, err := TenantFromContext(ctx)
	if err != nil {
		return nil, err
	}
	if p.Amount <= 0 {
		return nil, finalError("BAD_USER_INPUT", "amount must be positive (minor units)")
	}
	tx := ent.FromContext(ctx)
	o, err := p.QueryOrder().Where(order.TenantID(tenant)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, finalError("NOT_FOUND", "order not found")
	}
	if err != nil {
		return nil, err
	}
	if p.Amount != o.Amount {
		return nil, finalError("BAD_USER_INPUT", "amount must equal the order's amount")
	}
	// Check and set in one statement: of two different payments of one
	// order, exactly one gets here; the row lock it takes holds the other
	// back until this transaction ends.
	n, err := tx.Order.Update().
		Where(order.ID(o.ID), order.TenantID(tenant), order.Paid(false)).
		SetPaid(true).
		Save(ctx)
	if err != nil {
		return nil, err
	}
	key, _ := idem.KeyFromContext(ctx)
	if n == 0 {
		// Paid by another payment. An earlier attempt of this one may have
		// charged before it was rolled back (a crash, a lost lease): give
		// that money back before answering, or the customer pays twice.
		if idem.ClaimFromContext(ctx).Attempt > 1 {
			if _, err := r.provider.Void(ctx, tenant, key); err != nil {
				return nil, err // retryable: the next attempt voids again
			}
		}
		return nil, finalError("ORDER_ALREADY_PAID", "order is already paid")
	}
	charge, err := r.provider.Charge(ctx, provider.ChargeRequest{
		Tenant: tenant,
		// Who asked for the money: the request's user, or, when the
		// recoverer finishes the payment, the user it was claimed by
		// (idem.Config.CallerContext).
		User:     UserFromContext(ctx),
		Key:      key,
		OrderID:  o.ID,
		Amount:   p.Amount,
		Currency: o.Currency,
	})
	if errors.Is(err, provider.ErrKeyMismatch) {
		return nil, finalError("PAYMENT_REJECTED", "the payment provider rejected the charge")
	}
	if err != nil {
		// Retryable: the claim is released and a retry with the same key
		// charges again, which the provider deduplicates.
		return nil, err
	}
	paid, err := p.Update().SetProviderChargeID(charge.ID).Save(ctx)
	if err != nil {
		return nil, err
	}
	// The receipt is sent after the payment commits, and only if it does:
	// it is recorded in this transaction (River's outbox, or on MySQL the
	// receipt table).
	if err := r.effects.enqueueReceipt(ctx, SendReceiptArgs{Tenant: tenant, OrderID: o.ID, PaymentID: p.ID}); err != nil {
		return nil, err // retryable: rolled back and released
	}
	return paid, nil
}

// finalError is a business-rule error: final, so stored and replayed.
func finalError(code, message string) error {
	return idem.Final(&gqlerror.Error{Message: message, Extensions: map[string]any{"code": code}})
}

// refund records a refund of a payment of the caller's tenant, if the
// payment's refunds stay within what it paid.
func (r *Resolver) refund(ctx context.Context, rf *ent.Refund) (*ent.Refund, error) {
	tenant, err := TenantFromContext(ctx)
	if err != nil {
		return nil, err
	}
	if rf.Amount <= 0 {
		return nil, finalError("BAD_USER_INPUT", "amount must be positive (minor units)")
	}
	tx := ent.FromContext(ctx)
	p, err := tx.Payment.Query().Where(payment.ID(rf.PaymentID), payment.TenantID(tenant)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, finalError("NOT_FOUND", "payment not found")
	}
	if err != nil {
		return nil, err
	}
	// Check and add in one statement, which locks the payment's row: of two
	// concurrent refunds, the second sees the first's amount.
	n, err := tx.Payment.Update().
		Where(payment.ID(p.ID), payment.TenantID(tenant), payment.RefundedAmountLTE(p.Amount-rf.Amount)).
		AddRefundedAmount(rf.Amount).
		Save(ctx)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, finalError("REFUND_EXCEEDS_PAYMENT", "the refunds of a payment may not exceed what it paid")
	}
	return rf, nil
}
