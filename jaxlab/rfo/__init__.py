"""RFO: reparameterization flow policy optimization (flow policies, CFM regularisers)."""
