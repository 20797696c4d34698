"""SWE-bench round trip: task instances in as git seeds, predictions out, predictions evaluated.

* :mod:`.tasks` reads SWE-bench's task instances and predictions (JSON Lines) as untrusted input;
* :mod:`.patches` applies a patch to a commit's tree in the agent's cache, without a checkout;
* :mod:`.seeds` writes one git seed per task instance (``agent swebench import``): what it
  holds is chosen by :mod:`.seed_contents`, and :mod:`.seed_folders` writes its folder;
* :mod:`.predictions` turns a batch's results into predictions (``agent swebench predictions``);
* :mod:`.evaluation` tests predictions in the sandbox and writes SWE-bench's report
  (``agent swebench evaluate``).
"""
