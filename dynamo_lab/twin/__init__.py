"""The local twin: the real Dynamo frontend and KV router with mocker workers, on this machine."""
