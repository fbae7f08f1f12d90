"""Student Parallelism: boosted shallow students of a deep teacher, served in parallel and pruned under load."""
from sgl.systems.serving.students.encoders import (accuracy, batched_logits, bert_config, encode_sentences,
                                                   train_classifier)
from sgl.systems.serving.students.ensemble import StudentEnsemble, distil_students
from sgl.systems.serving.students.load import AdaptivePruning, bursty_arrivals, replay
from sgl.systems.serving.students.run import StudentsConfig, run_students

__all__ = ["encode_sentences", "bert_config", "train_classifier", "accuracy", "batched_logits", "StudentEnsemble",
           "distil_students", "AdaptivePruning", "bursty_arrivals", "replay", "StudentsConfig", "run_students"]
